import sys

from instance.main import main

sys.exit(main())
