"""All-or-none outputs for commands that write several files.

:class:`Staging` hands out temporary stand-ins for a command's output files and folders,
each in a hidden temporary folder beside the real one (same file system, so the final
move is a rename). The writers keep using :mod:`gradsched.io`'s atomic writes on the
stand-ins. When the command succeeds, :meth:`Staging.commit` moves everything into place;
when any step fails, the temporary folders are removed and no output, partial folder or
stale sidecar is left behind.

* Creating the stand-ins checks up front that every output can be written (an output under
  a file, in a read-only or missing place, or an existing link, FIFO, socket or folder
  where a file belongs fails before any work).
* :meth:`Staging.commit` keeps the previous version of every replaced output aside; if a
  move fails, the outputs already moved are taken back and the previous versions restored,
  so the targets are as they were. SIGINT/SIGTERM/SIGHUP/SIGUSR1 are held (blocked, not
  handled) during the moves and delivered afterwards.
* Stand-in folders are named ``.NAME.PID-START.RANDOM.staging``
  (:func:`gradsched.io.process_tag`): a later run that writes in the same folder removes
  those of a process that is gone (a run killed by SIGKILL, or by a signal that does not
  unwind).
* An output that is a character device or this process's stream (``/dev/null``,
  ``/dev/stdout``) is staged in the system's temporary folder and its content written
  through on commit (sidecars written beside it are dropped).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from gradsched.errors import InputError
from gradsched.io import move, output_target, remove_leftovers, temporary
from gradsched.signal_hold import signals_held
from gradsched.streams import deliver_stdout


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` (or ``path`` itself) that exists."""
    current = path
    while not os.path.lexists(current) and current != current.parent:
        current = current.parent
    return current


def check_writable(path: str | Path, *, directory: bool = False) -> Path:
    """Refuse an output that cannot be created: an existing link, FIFO, socket, block
    device or folder where a file is expected (:func:`gradsched.io.output_target`; a
    character device such as ``/dev/null`` is accepted), a file where a folder is
    expected, a path below a file, or one in a folder this process may not write.
    Returns the nearest existing folder (where a stand-in can be made)."""
    target = Path(path)
    if directory:
        if os.path.lexists(target) and not target.is_dir():
            raise InputError("output folder is an existing file", path=target)
    elif output_target(target) == "through":
        return target.parent
    base = _existing_ancestor(target if directory else target.parent)
    if not base.is_dir():
        raise InputError(f"cannot create the output: {base} is a file, not a folder",
                         path=target)
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"cannot create the output: folder {base} is not writable",
                         path=target)
    return base


class _Entry:
    """One stand-in folder and where its content goes."""

    def __init__(self, tmp: Path, final_dir: Path, through: Path | None = None) -> None:
        self.tmp = tmp
        self.final_dir = final_dir
        self.through = through  # a character device the stand-in's file is written to


class _Moves:
    """The renames of one commit, undone in reverse order by :meth:`undo`."""

    def __init__(self) -> None:
        self.done: list[tuple[Path, Path | None]] = []  # (target, its previous version)
        self.created: list[Path] = []  # folders made for the outputs

    def mkdirs(self, folder: Path) -> None:
        missing = []
        current = folder
        while not os.path.lexists(current) and current != current.parent:
            missing.append(current)
            current = current.parent
        folder.mkdir(parents=True, exist_ok=True)
        self.created.extend(reversed(missing))

    def undo(self) -> bool:
        """Take back every move; False if a previous version could not be restored."""
        restored = True
        for target, previous in reversed(self.done):
            with contextlib.suppress(OSError):
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                elif os.path.lexists(target):
                    target.unlink()
            if previous is not None:
                try:
                    move(previous, target)
                except OSError:
                    restored = False
        for folder in reversed(self.created):
            with contextlib.suppress(OSError):
                folder.rmdir()
        self.done.clear()
        self.created.clear()
        return restored


class Staging:
    """Stand-ins for several outputs, moved into place together on :meth:`commit`.

    Use as a context manager: leaving the block normally commits; an exception (including
    the ``SystemExit`` that :func:`gradsched.distributed.lifeline.exit_on_signals` raises
    on SIGTERM) removes every stand-in and re-raises.
    """

    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def _make(self, name: str, where: Path, anchor: Path) -> Path:
        try:
            return temporary(where, name, suffix=".staging", directory=True)
        except OSError as exc:
            raise InputError(f"cannot create the output: {exc.strerror or exc}",
                             path=anchor) from exc

    def file(self, path: str | Path) -> Path:
        """A stand-in path for the output file ``path`` (sidecars written beside the
        stand-in, such as ``x.meta.json`` of ``x.csv``, move with it)."""
        target = Path(path)
        where = check_writable(target)
        if output_target(target) == "through":
            tmp = Path(tempfile.mkdtemp(prefix=".gradsched.", suffix=".staging"))
            self._entries.append(_Entry(tmp, target.parent, through=target))
            return tmp / "output"
        tmp = self._make(target.name, where, target)
        self._entries.append(_Entry(tmp, target.parent))
        return tmp / target.name

    def folder(self, path: str | Path) -> Path:
        """A stand-in folder for the output folder ``path``; what is written in it is
        merged into ``path`` on commit (existing files of the same name are replaced)."""
        target = Path(path)
        where = check_writable(target, directory=True)
        tmp = self._make(target.name or "out", where, target)
        self._entries.append(_Entry(tmp, target))
        return tmp

    def commit(self) -> None:
        """Move every stand-in's content into place, then remove the stand-ins. If a move
        fails, the targets are restored as they were and the error is raised. What the
        command printed is delivered first (:func:`gradsched.streams.deliver_stdout`): a
        failing standard output leaves every target as it was."""
        try:
            deliver_stdout()
        except BaseException:
            self.abort()
            raise
        moves = _Moves()
        staged = [entry for entry in self._entries if entry.through is None]
        through = [entry for entry in self._entries if entry.through is not None]
        aside = [self._make("previous", entry.tmp.parent, entry.final_dir) for entry in staged]
        self._entries.extend(_Entry(folder, folder) for folder in aside)
        try:
            with signals_held():  # a signal takes effect after the last move
                self._move_all(staged, aside, through, moves)
        finally:
            self.abort()

    @staticmethod
    def _move_all(staged: list[_Entry], aside: list[Path], through: list[_Entry],
                  moves: _Moves) -> None:
        """Move the stand-ins into place; on failure restore the targets as they were."""
        try:
            for entry, keep in zip(staged, aside, strict=True):
                _merge(entry.tmp, entry.final_dir, keep, moves)
            for entry in through:
                _write_through(entry.tmp / "output", entry.through)
        except BaseException:
            if not moves.undo():  # keep the previous versions where a later run leaves them
                for folder in aside:
                    with contextlib.suppress(OSError):
                        folder.rename(folder.with_name(folder.name[:-len(".staging")] + ".kept"))
            raise

    def abort(self) -> None:
        """Remove every stand-in (and whatever was written in them)."""
        for entry in self._entries:
            shutil.rmtree(entry.tmp, ignore_errors=True)
            if entry.through is None:
                remove_leftovers(entry.tmp.parent)
        self._entries.clear()

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        entries = list(self._entries)  # to name the user's paths after the stand-ins go
        if exc_type is None:
            try:
                self.commit()
            except (OSError, InputError) as error:
                renamed = _named(error, entries)
                if renamed is error:
                    raise
                raise renamed from error
            return
        self.abort()
        if isinstance(exc, OSError | InputError):
            renamed = _named(exc, entries)
            if renamed is not exc:
                raise renamed from exc


def _user_path(path: str | Path, entries: list[_Entry]) -> Path:
    """The user's path for ``path`` inside one of the stand-ins (``path`` otherwise)."""
    path = Path(path)
    for entry in entries:
        with contextlib.suppress(ValueError):
            rest = path.relative_to(entry.tmp)
            return entry.through or entry.final_dir / rest
    return path


def _named(exc: BaseException, entries: list[_Entry]) -> BaseException:
    """``exc`` with a stand-in's path replaced by the user's (``exc`` itself otherwise)."""
    if isinstance(exc, InputError) and exc.path is not None:
        path = _user_path(exc.path, entries)
        if str(path) != exc.path:
            return InputError(exc.reason, path=path, row=exc.row, line=exc.line,
                              field=exc.field)
    if isinstance(exc, OSError) and exc.filename is not None:
        path = _user_path(exc.filename, entries)
        if str(path) != str(exc.filename):
            return InputError(f"cannot write: {exc.strerror or exc}", path=path)
    return exc


def _write_through(source: Path, device: Path) -> None:
    """Copy the stand-in file's bytes into a character device or stream, in place."""
    if not source.is_file():
        return
    with open(source, "rb") as src, open(device, "wb") as dst:
        shutil.copyfileobj(src, dst)


def _merge(source: Path, target: Path, aside: Path, moves: _Moves) -> None:
    """Move the content of folder ``source`` into folder ``target`` (renames; a sub-folder
    is merged into an existing one of the same name). What a move replaces goes to
    ``aside`` first, and every move is recorded in ``moves`` so that it can be undone."""
    moves.mkdirs(target)
    for entry in sorted(source.iterdir()):
        dest = target / entry.name
        if entry.is_dir() and not entry.is_symlink() and dest.is_dir() \
                and not dest.is_symlink():
            _merge(entry, dest, aside, moves)
            continue
        if not entry.is_dir() and output_target(dest) == "through":  # refuses a link, FIFO
            _write_through(entry, dest)
            continue
        previous = None
        if os.path.lexists(dest):
            previous = aside / str(len(moves.done))
            move(dest, previous)
        moves.done.append((dest, previous))
        move(entry, dest)
