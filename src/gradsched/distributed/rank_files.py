"""The files a launched rank and its launcher exchange in the launch's temporary folder:
its result (JSON) and its one-line error. One module, so that the launcher
(:mod:`gradsched.distributed.launch`) and the rank (:mod:`gradsched.distributed.worker`)
name them alike without importing each other."""

from __future__ import annotations

from pathlib import Path

ERROR_LINE_CHARS = 300
"""Longest error line a rank reports to its launcher."""


def result_name(rank: int) -> str:
    """The file rank ``rank`` writes its task's result to (JSON); errors about a result
    read back name it."""
    return f"rank{rank}.result.json"


def result_path(workdir: Path, rank: int) -> Path:
    """Where rank ``rank`` writes its task's result."""
    return workdir / result_name(rank)


def failure_path(workdir: Path, rank: int) -> Path:
    """Where rank ``rank`` leaves its one-line error for the launcher."""
    return workdir / f"rank{rank}.error"


__all__ = ["ERROR_LINE_CHARS", "failure_path", "result_name", "result_path"]
