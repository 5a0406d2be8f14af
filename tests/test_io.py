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


def test_read_text_with_universal_newlines_reads_as_path_read_text(tmp_path) -> None:
    """The gate's text for readers that read as ``Path.read_text`` does: CRLF and CR
    become LF, and bad bytes become U+FFFD when asked (a LaTeX log)."""
    from gradsched.io import read_text

    path = tmp_path / "mixed.txt"
    path.write_bytes(b"a\r\nb\rc\nd\xff\n")
    assert read_text(path, replace_errors=True, universal_newlines=True) == \
        path.read_text(encoding="utf-8", errors="replace")
    good = tmp_path / "good.txt"
    good.write_bytes(b"a\r\nb\rc\n")
    assert read_text(good, universal_newlines=True) == good.read_text(encoding="utf-8")
    assert read_text(good) == "a\r\nb\rc\n"
