"""``python -m openclaw_lossless``: the same CLI as the ``openclaw-lossless`` console script."""

import sys

from openclaw_lossless.cli.main import main

sys.exit(main())
