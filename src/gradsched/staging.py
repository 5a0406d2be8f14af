"""All-or-none outputs for commands that write several files.

:class:`Staging` hands out temporary stand-ins for a command's output files and folders,
each in a hidden temporary folder beside the real one (same file system, so the final
move is a rename). The writers keep using :mod:`gradsched.io`'s atomic writes on the
stand-ins. When the command succeeds, :meth:`Staging.commit` moves everything into place;
when any step fails, the temporary folders are removed and no output, partial folder or
stale sidecar is left behind. Creating the stand-ins checks up front that every output
can be written (an output under a file, or in a read-only or missing place, fails before
any work: ``gradsched run -o <unwritable>`` used to lose a whole timed run at the final
write).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from gradsched.errors import InputError


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` (or ``path`` itself) that exists."""
    current = path
    while not os.path.lexists(current) and current != current.parent:
        current = current.parent
    return current


def check_writable(path: str | Path, *, directory: bool = False) -> Path:
    """Refuse an output that cannot be created: one that is a folder where a file is
    expected (or the reverse), below a file, or in a folder this process may not write.
    Returns the nearest existing folder (where a stand-in can be made)."""
    target = Path(path)
    if target.is_dir() and not directory:
        raise InputError("output is a folder, expected a file path", path=target)
    if target.exists() and directory and not target.is_dir():
        raise InputError("output folder is an existing file", path=target)
    base = _existing_ancestor(target if directory else target.parent)
    if not base.is_dir():
        raise InputError(f"cannot create the output: {base} is a file, not a folder",
                         path=target)
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"cannot create the output: folder {base} is not writable",
                         path=target)
    return base


class Staging:
    """Stand-ins for several outputs, moved into place together on :meth:`commit`.

    Use as a context manager: leaving the block normally commits; an exception removes
    every stand-in and re-raises.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[Path, Path]] = []  # (temporary folder, final folder)

    def _make(self, final_dir: Path, name: str, where: Path, anchor: Path) -> Path:
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".staging", dir=where))
        except OSError as exc:
            raise InputError(f"cannot create the output: {exc.strerror or exc}",
                             path=anchor) from exc
        self._entries.append((tmp, final_dir))
        return tmp

    def file(self, path: str | Path) -> Path:
        """A stand-in path for the output file ``path`` (sidecars written beside the
        stand-in, such as ``x.meta.json`` of ``x.csv``, move with it)."""
        target = Path(path)
        where = check_writable(target)
        return self._make(target.parent, target.name, where, target) / target.name

    def folder(self, path: str | Path) -> Path:
        """A stand-in folder for the output folder ``path``; what is written in it is
        merged into ``path`` on commit (existing files of the same name are replaced)."""
        target = Path(path)
        where = check_writable(target, directory=True)
        return self._make(target, target.name or "out", where, target)

    def commit(self) -> None:
        """Move every stand-in's content into place, then remove the stand-ins."""
        for tmp, final_dir in self._entries:
            _merge(tmp, final_dir)
        self.abort()

    def abort(self) -> None:
        """Remove every stand-in (and whatever was written in them)."""
        for tmp, _ in self._entries:
            shutil.rmtree(tmp, ignore_errors=True)
        self._entries.clear()

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def _merge(source: Path, target: Path) -> None:
    """Move the content of folder ``source`` into folder ``target`` (renames; a sub-folder
    is merged into an existing one of the same name)."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        dest = target / entry.name
        if entry.is_dir() and not entry.is_symlink() and dest.is_dir():
            _merge(entry, dest)
            continue
        try:
            os.replace(entry, dest)
        except OSError:  # another file system under the target: copy, then remove
            shutil.move(str(entry), str(dest))

