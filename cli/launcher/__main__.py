"""`python -m cli.launcher [options]`: the same as `strata up [options]`."""

import sys

from cli.main import cli

sys.exit(cli(["up", *sys.argv[1:]]))
