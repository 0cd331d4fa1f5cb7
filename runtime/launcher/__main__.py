"""`python -m runtime.launcher [options]`: the same as `strata up [options]`."""

import sys

from runtime.launcher.cli import cli

sys.exit(cli(["up", *sys.argv[1:]]))
