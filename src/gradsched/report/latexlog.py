"""Problems in a LaTeX log that must fail the paper build.

LaTeX finishes with exit 0 when a float is taller than its page (the float and what
follows it silently fall off the PDF) or when a reference or citation is undefined
(it prints "??"). The paper rule runs :func:`problems` on the log and fails on any.
"""

from __future__ import annotations

import re
from pathlib import Path

from gradsched.errors import InputError
from gradsched.io import read_text

PATTERNS = (
    re.compile(r"Float too large for page by [0-9.]+pt on input line \d+"),
    re.compile(r"Reference `[^']*' on page \d+ undefined on input line \d+"),
    re.compile(r"Citation `[^']*' on page \d+ undefined on input line \d+"),
    re.compile(r"There were undefined references"),
    re.compile(r"There were undefined citations"),
)


def problems(text: str) -> list[str]:
    """Every matching message of ``text`` (a LaTeX ``.log``), in order, de-duplicated."""
    found: list[str] = []
    for line in text.replace("\n", " ").split("LaTeX Warning: "):
        for pattern in PATTERNS:
            match = pattern.search(line)
            if match and match.group(0) not in found:
                found.append(match.group(0))
    return found


def check_log(path: str | Path) -> list[str]:
    """:func:`problems` of the log at ``path``; a missing log is an error."""
    path = Path(path)
    if not path.is_file():
        raise InputError("LaTeX log not found", path=path)
    return problems(read_text(path, replace_errors=True, universal_newlines=True))
