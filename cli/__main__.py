"""`python -m cli [verb] [options]`: the same as `strata [verb] [options]`."""

import sys

from cli.main import cli

sys.exit(cli())
