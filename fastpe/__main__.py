"""``python -m fastpe`` is the ``fastpe`` command."""

import sys

from .cli import main

sys.exit(main())
