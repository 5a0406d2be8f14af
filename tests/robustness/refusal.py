"""How the robustness tests read a refusal: the CLI run in-process, exit status 2, no
traceback, no C++ frames, and the error on its last line (``refused``) or as the only line
(``one_line``)."""

from __future__ import annotations

import pytest

from gradsched.cli import main

FRAMES = ("Traceback", "internal error", "c10::", "frame #", "C++")
"""What a clear error never prints: a Python traceback, the CLI's internal-error line, a
C++ stack."""


def _exit_and_err(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert not any(frame in err for frame in FRAMES), err
    assert code == 2, f"exit {code}: {err}"
    return code, err


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """The last line of the refusal of ``argv`` (an argparse usage block may come before
    it), which says ``error:`` and holds every one of ``needles``."""
    _, err = _exit_and_err(argv, capsys)
    last = err.strip().splitlines()[-1]
    assert "error:" in last, err
    for needle in needles:
        assert needle in last, last
    return last


def one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The refusal of ``argv``, which must be exactly one ``error:`` line."""
    _, err = _exit_and_err(argv, capsys)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], err
    return lines[0]


__all__ = ["FRAMES", "one_line", "refused"]
