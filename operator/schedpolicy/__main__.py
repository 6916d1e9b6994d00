import sys

from schedpolicy.cli import main

sys.exit(main())
