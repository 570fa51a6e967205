"""`python -m marketplace` is the `marketplace` command."""

import sys

from marketplace.cli import main

sys.exit(main())
