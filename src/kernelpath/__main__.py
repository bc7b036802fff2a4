"""``python -m kernelpath``: the command line, as the ``kernelpath`` command."""

import sys

from .cli import main

sys.exit(main())
