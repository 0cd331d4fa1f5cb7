"""Run by tests/unit/test_preload.py as a service would be (`python -m preload_probe CODE`):
prints what it was given, then exits with CODE (or waits for a signal when CODE is `wait`)."""

import json
import os
import signal
import sys
import time

print(json.dumps({"argv": sys.argv[1:], "probe": os.environ.get("PROBE"), "sid": os.getsid(0)}))
sys.stdout.flush()
if sys.argv[1] == "wait":
    signal.pause()
    time.sleep(60)
sys.exit(int(sys.argv[1]))
