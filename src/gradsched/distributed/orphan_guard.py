"""``python -m gradsched.distributed.orphan_guard --parent-pid P -- COMMAND ...``.

Sets SIGTERM as this process's parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG)``,
see :mod:`gradsched.distributed.lifeline`) and then executes COMMAND in its place; the
setting survives ``execve`` for programs that are not set-uid (prctl(2)). ``gradsched
cluster`` runs each rank's command through it, so the ranks of a SIGKILLed ``cluster``
get SIGTERM at once. A module of its own so that ``-m`` does not re-import a module the
package already imported.
"""

from __future__ import annotations

import os
import signal
import sys

from gradsched.distributed.lifeline import ORPHANED_EXIT, set_parent_death_signal


def main(argv: list[str] | None = None) -> int:
    """``--parent-pid P -- COMMAND ...``: exec COMMAND with SIGTERM as its parent-death
    signal; exit ``ORPHANED_EXIT`` at once if the parent P is already gone."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] != "--parent-pid" or args[2] != "--":
        print("usage: python -m gradsched.distributed.orphan_guard --parent-pid P -- COMMAND ...",
              file=sys.stderr)
        return 2
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != int(args[1]):
        return ORPHANED_EXIT  # the parent died before the signal was armed
    try:
        os.execvp(args[3], args[3:])
    except OSError as exc:
        print(f"cannot start {args[3]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
