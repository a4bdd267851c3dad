"""``python -m quantformer <verb>``: the same as the ``quantformer`` console script."""

import sys

from .cli import main

sys.exit(main())
