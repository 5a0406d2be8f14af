"""Run a command in a private mount namespace whose ``/dev`` is a fresh tmpfs.

The namespace (``unshare --mount --propagation private``) gets its own ``/dev``: a tmpfs
holding a ``null`` character device (``mknod``, major 1 minor 3) and a ``stdout`` link to
``/proc/self/fd/1``. A command that replaced ``/dev/null`` there would change nothing
outside it: the real ``/dev`` is never touched. Needs root and permission to unshare and
mount; :func:`mountns_usable` says why not where it is missing.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

import pytest

_SETUP = ("mount -t tmpfs -o mode=755 gradsched-test-dev /dev && "
          "mknod -m 666 /dev/null c 1 3 && ln -s /proc/self/fd/1 /dev/stdout && "
          "ln -s /proc/self/fd/2 /dev/stderr && exec \"$@\"")


@functools.lru_cache(maxsize=1)
def mountns_usable() -> str | None:
    """None when a private mount namespace with a tmpfs and a device node can be made
    here, else the reason it cannot."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (mount and mknod in a private mount namespace)"
    for tool in ("unshare", "mount", "mknod"):
        if shutil.which(tool) is None:
            return f"needs the {tool} binary"
    with tempfile.TemporaryDirectory() as folder:
        probe = (f"mount -t tmpfs gradsched-probe {folder} && "
                 f"mknod {folder}/null c 1 3 && test -c {folder}/null")
        try:
            done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh",
                                   "-c", probe], capture_output=True, text=True, timeout=30,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare failed: {exc}"
        if done.returncode != 0:
            return f"unshare/mount/mknod not permitted here: {done.stderr.strip()[:200]}"
    return None


needs_mountns = pytest.mark.skipif(mountns_usable() is not None,
                                   reason=mountns_usable() or "private /dev usable")


def run_with_private_dev(argv: Sequence[str], *, timeout: float = 120,
                         env: dict[str, str] | None = None,
                         cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a private mount namespace with its own tmpfs ``/dev``."""
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           _SETUP, "sh", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd, check=False)
