"""`python -m tickwork_local.cli`: the same as the `tickwork` command."""

import sys

from tickwork_local.cli import main

sys.exit(main())
