"""``python -m gradsched``.

The working folder that ``python -m`` puts first on the import path is removed before
anything else is imported: a file planted there (``evil.py``, ``torch.py``) is never
loaded (``docs/errors.md``, "Data never selects code").

A Ctrl-C while the command line itself loads (pandas, numpy) is noted before it can be
lost: a library that imports an optional dependency inside ``try: ... except ImportError``
swallows the ImportError numpy makes of a KeyboardInterrupt, and the command would then run
on as if nothing happened."""

from gradsched.names import drop_implicit_cwd

drop_implicit_cwd()

import signal  # noqa: E402 - after the import path is cleaned
import sys  # noqa: E402

_interrupted: list[int] = []


def _note_interrupt(signum: int, _frame: object) -> None:
    _interrupted.append(signum)
    raise KeyboardInterrupt


def _interrupted_exit() -> None:
    print("gradsched: interrupted", file=sys.stderr)
    sys.exit(130)


signal.signal(signal.SIGINT, _note_interrupt)
try:
    from gradsched.cli import main
except BaseException:  # Ctrl-C while the entry point loads, whatever it became
    if _interrupted:
        _interrupted_exit()
    raise
if _interrupted:  # swallowed by a library during the imports
    _interrupted_exit()
signal.signal(signal.SIGINT, signal.default_int_handler)

sys.exit(main())
