"""``python -m quantformer <verb>``: the same as the ``quantformer`` console script."""

import sys

from .cli.serve import die_with_parent

if __name__ == "__main__":  # not when a Dask worker process re-imports the main module
    die_with_parent()  # started by R: end with R, even when R is killed (issue 17)

    from .cli.main import main

    sys.exit(main())
