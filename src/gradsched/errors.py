"""Error types that name the file, row/line and field of bad input."""

from __future__ import annotations

from pathlib import Path


class GradschedError(Exception):
    """Base class of every error gradsched raises on purpose."""


class InputError(GradschedError, ValueError):
    """Bad input data: names the file, the line or row, and the field.

    ``row`` is the 1-based data row of a CSV (the header is row 0); ``line`` is the
    1-based physical line of a text log. Either may be absent when the problem is
    about the whole file.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        row: int | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.row = row
        self.line = line
        self.field = field
        if self.path is not None and "not found" in message and Path(self.path).is_dir():
            message += " (it is a folder; a file is expected here)"
        self.reason = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.reason}" if prefix else self.reason


class ConfigError(GradschedError, ValueError):
    """A bad command-line option, knob or configuration value."""


class ConfigFileError(InputError, ConfigError):
    """A bad value in a configuration file (YAML/JSON settings): a configuration error
    that names the file and the field, like an :class:`InputError`."""
