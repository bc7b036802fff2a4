"""``python -m kernelpath.cli``: the ``kernelpath`` command."""

import sys

from .main import main

sys.exit(main())
