import sys

from topology_master.main import main

sys.exit(main())
