import sys

from schedpolicy.app.cli import main

sys.exit(main())
