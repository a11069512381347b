"""`python -m verify` is the `verify` console script."""

import sys

from .cli import main

sys.exit(main())
