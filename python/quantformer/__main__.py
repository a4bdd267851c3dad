"""``python -m quantformer <verb>``: the same as the ``quantformer`` console script."""

import sys

from .serve import die_with_parent

die_with_parent()  # started by R: end with R, even when R is killed (issue 17)

from .cli import main  # noqa: E402

sys.exit(main())
