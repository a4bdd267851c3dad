"""``python -m quantformer <verb>``: the same as the ``quantformer`` console script."""

import sys

from .cli import main

if __name__ == "__main__":  # not when a Dask worker process re-imports the main module
    sys.exit(main())
