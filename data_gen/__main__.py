"""``python -m data_gen``: see :mod:`data_gen.cli`."""

import sys

from data_gen.cli import main

if __name__ == "__main__":
    sys.exit(main())
