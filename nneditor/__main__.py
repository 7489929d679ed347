"""`python -m nneditor` — same as the `nneditor` command."""

import sys

from nneditor.cli import main

sys.exit(main())
