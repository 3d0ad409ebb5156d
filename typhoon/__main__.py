import sys

from typhoon.cli import main

sys.exit(main())
