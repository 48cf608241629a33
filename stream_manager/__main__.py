import sys

from stream_manager.main import main

sys.exit(main())
