"""A stand-in command for the fork server's tests (not a gradsched verb): ``argv[0]`` says
what to do. ``report CODE``: print the arguments, the working folder and ``PROBE`` to
stdout, a line to stderr, and exit with CODE. ``sleep PIDFILE``: write the process id to
PIDFILE, then sleep (SIGTERM ends it with 143, as the CLI's own handler does)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from gradsched.distributed.lifeline import exit_on_signals


def main(argv: list[str]) -> int:
    if argv[0] == "report":
        print(f"served {argv} in {os.getcwd()} PROBE={os.environ.get('PROBE')}")
        print("to stderr", file=sys.stderr)
        return int(argv[1])
    with exit_on_signals():
        Path(argv[1]).write_text(str(os.getpid()))
        time.sleep(120)
    return 0
