import sys

from metrics_manager.main import main

sys.exit(main())
