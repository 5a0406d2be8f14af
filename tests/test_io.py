"""Atomic writes: the output has the mode a plain open() would give it."""

from __future__ import annotations

from pathlib import Path


def test_outputs_are_readable_by_others(tmp_path: Path) -> None:
    """Atomic writes go through mkstemp (mode 0600); the renamed output has the mode a plain
    open() would give it."""
    import os
    import stat

    from gradsched.io import write_text_atomic

    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "out.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o644
