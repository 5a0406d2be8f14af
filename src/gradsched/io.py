"""Atomic file writes: write to a temporary file in the same folder, then rename.

An interrupted run therefore never leaves a half-written output behind. Also the one
JSON reader (:func:`read_json`) whose errors name the file and line.

Only a regular file (or a path that does not exist yet) is replaced by a rename. A
character device (``/dev/null``, a terminal) and the process's own streams
(``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``) are written *through*: opened and written
in place, never renamed over or chmod-ed. Any other existing target (a symbolic link, a
FIFO, a socket, a folder, a block device) is refused (:func:`output_target`).

Temporary names carry the writer's process id and start time
(``.NAME.PID-START.RANDOM.tmp``, :func:`process_tag`), so that a later run recognises the
leftovers of a process that was killed and removes them (:func:`remove_leftovers`).

Configuration files are checked against their JSON schema in
:mod:`gradsched.schema_check` (the package's ``schemas/``, which the workflow validates with
too); a mismatch names the file and the field.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import yaml

from gradsched.errors import ConfigError, InputError
from gradsched.procfs import process_stat
from gradsched.streams import deliver_stdout

STREAM_PATHS = ("/dev/stdout", "/dev/stderr")
"""Paths that name this process's own output streams: written through, whatever they are."""

_STREAM_PREFIXES = ("/dev/fd/", "/proc/self/fd/")
_LEFTOVER = re.compile(r"^\..+\.(\d+)-(\d+)\.[^./]+\.(tmp|staging)$")



def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def readable_mode(path: str | Path, directory: bool = False) -> None:
    """Give ``path`` the mode a plain ``open``/``mkdir`` would (0666/0777 less the umask):
    ``mkstemp``/``mkdtemp`` create 0600/0700, which would leave outputs unreadable by
    others after the rename."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


# ----------------------------------------------------------------------------- targets


def _is_stream(path: str | Path) -> bool:
    text = os.path.normpath(str(path)) if str(path) else ""
    return text in STREAM_PATHS or text.startswith(_STREAM_PREFIXES)


def _kind(mode: int) -> str:
    """The name of a non-regular file type, for the refusal message."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def output_target(path: str | Path) -> str:
    """How an output file may be written: ``"new"`` (nothing there yet), ``"file"`` (a
    regular file, replaced by a rename) or ``"through"`` (a character device or one of
    this process's streams: opened and written in place). Any other existing target
    raises :class:`~gradsched.errors.InputError` naming it; nothing is touched."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "new"
    if stat.S_ISREG(info.st_mode):
        return "file"
    if stat.S_ISCHR(info.st_mode):
        return "through"
    followed = None
    with contextlib.suppress(OSError):
        followed = os.stat(path)
    if stat.S_ISLNK(info.st_mode):
        if followed is not None and (stat.S_ISCHR(followed.st_mode) or (
                _is_stream(path) and not stat.S_ISDIR(followed.st_mode))):
            return "through"
        raise InputError("output is a symbolic link; gradsched will not replace a link "
                         "(give the path it points to, or another path)", path=path)
    raise InputError(f"output is {_kind(info.st_mode)}, not a regular file; gradsched will "
                     "not replace it (give a file path)", path=path)


# ----------------------------------------------------------------------------- leftovers


def _start_time(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``, read by
    :func:`gradsched.procfs.process_stat`); None where it cannot be read (no such process,
    or no ``/proc``)."""
    stat = process_stat(pid)
    return None if stat is None else stat[1]


def process_tag() -> str:
    """``PID-START`` of this process (start 0 where ``/proc`` is missing): part of every
    temporary name, so that :func:`remove_leftovers` can tell a dead writer's."""
    return f"{os.getpid()}-{_start_time(os.getpid()) or 0}"


def _alive(pid: int, start: int) -> bool:
    """Whether process ``pid`` that started at ``start`` still runs (a reused pid has
    another start time)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _start_time(pid)
    return now is None or start == 0 or now == start


def remove_leftovers(folder: str | Path) -> list[Path]:
    """Remove the temporary files and staging folders (``.NAME.PID-START.RANDOM.tmp`` /
    ``.staging``) in ``folder`` whose process is gone; return what was removed."""
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        match = _LEFTOVER.match(name)
        if match is None or _alive(int(match.group(1)), int(match.group(2))):
            continue
        path = Path(folder) / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


NAME_MAX = 255
"""Longest file name (bytes) on Linux file systems; ``os.pathconf`` may say less."""

_RANDOM_CHARS = 8
"""Length of ``tempfile``'s random part."""


def _name_max(folder: Path) -> int:
    try:
        return min(int(os.pathconf(folder, "PC_NAME_MAX")), NAME_MAX)
    except (OSError, ValueError):
        return NAME_MAX


def _shorten(name: str, limit: int) -> str:
    """``name`` cut to at most ``limit`` bytes of UTF-8 (whole characters; at least one)."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= limit:
        return name
    return raw[:max(limit, 1)].decode("utf-8", "ignore") or "x"


def temporary(folder: Path, name: str, *, suffix: str, directory: bool = False) -> Path:
    """A new temporary file or folder ``.NAME.PID-START.RANDOM<suffix>`` in ``folder``
    (leftovers of dead processes there are removed first). ``NAME`` is shortened so that
    the whole name fits the file system's limit: an output whose own name is legal (say
    244 bytes) is never refused because its hidden temporary name would be too long."""
    remove_leftovers(folder)
    tag = process_tag()
    fixed = len(f"..{tag}.".encode()) + _RANDOM_CHARS + len(suffix.encode())
    prefix = f".{_shorten(name, _name_max(folder) - fixed)}.{tag}."
    if directory:
        return Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=folder))
    fd, made = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
    os.close(fd)
    return Path(made)


def move(source: str | Path, dest: str | Path) -> None:
    """Rename ``source`` to ``dest`` (replacing it); copy and remove only across file
    systems (any other failure is raised)."""
    try:
        os.replace(source, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.move(str(source), str(dest))


# ----------------------------------------------------------------------------- writes


def _open_kwargs(mode: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
        kwargs.setdefault("newline", "")
    return kwargs


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` on success.

    A character device or stream (:func:`output_target`) is written through instead; any
    other existing non-regular target is refused before anything is written. Errors name
    ``path``, never the temporary file."""
    target = Path(path)
    if output_target(target) == "through":
        try:
            with open(target, mode, **_open_kwargs(mode, kwargs)) as handle:
                yield handle
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", path=target) from exc
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise InputError(f"cannot create the output: {exc.filename} is a file, not a folder",
                         path=target) from exc
    try:
        tmp = temporary(target.parent, target.name, suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot create the output: {exc.strerror or exc}",
                         path=target) from exc
    try:
        with open(tmp, mode, **_open_kwargs(mode, kwargs)) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        readable_mode(tmp)
        output_target(target)  # a link or FIFO put there meanwhile is refused, not replaced
        deliver_stdout()  # what the command printed reaches its reader before the rename
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename not in (None, str(tmp)):
            raise
        raise InputError(f"cannot write: {exc.strerror or exc}", path=target) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_open(path, "w") as handle:
        handle.write(text)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as stable, indented JSON (sorted keys, trailing newline) atomically."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


CSV_DIGITS = 9
"""Significant digits of every float a results CSV holds (:func:`write_csv_atomic`).

Enough for every quantity the project measures or derives (times to the nanosecond of a
second, sizes to the byte below a gigabyte), and few enough that round-off of the last
bits (1 ulp, a relative 2.2e-16: numpy's AVX-512 and AVX2 ``exp``/``log``/``log10``/
``power`` loops disagree there on a few per cent of their inputs) does not reach the
printed digits: with relative noise ``e``, a value prints differently only when it lies
within ``e`` of a rounding boundary, a chance of about ``e * 10**CSV_DIGITS`` (1e-7)."""


def round_significant(value: Any, digits: int = CSV_DIGITS) -> Any:
    """``value`` (a float or an array of floats) rounded to ``digits`` significant digits.

    Rounds the decimal representation (Python's correctly rounded ``format(x, '.Ng')``), so
    the result is the same on every CPU; NaN and infinities pass through."""
    if hasattr(value, "astype"):  # a numpy array: a rounded copy (io does not import numpy)
        out = value.astype(float)
        flat = out.reshape(-1)  # a view of the new, contiguous copy
        for i, v in enumerate(flat):
            flat[i] = float(format(float(v), f".{digits}g"))
        return out
    return float(format(float(value), f".{digits}g"))


def _floats_in_objects(frame: Any, float_format: str) -> Any:
    """``frame`` with the floats of its object columns (a column that mixes numbers and
    text) written as ``float_format`` too: pandas applies ``float_format`` only to float
    columns and would print these with every digit of their ``repr``."""
    objects = [c for c in frame.columns if frame[c].dtype == object]
    if not objects:
        return frame

    def fmt(cell: Any) -> Any:  # numpy's float64 is a float; bool is not
        if isinstance(cell, float) and math.isfinite(cell):
            return float_format % cell
        return cell
    out = frame.copy()
    for column in objects:
        out[column] = out[column].map(fmt)
    return out


def write_csv_atomic(path: str | Path, frame: Any,
                     float_format: str = f"%.{CSV_DIGITS}g") -> None:
    """Write a pandas DataFrame as CSV atomically. Every float, in a float column or among
    the text of an object column, is written with ``float_format`` (:data:`CSV_DIGITS`
    significant digits): the same bytes on every CPU (see :data:`CSV_DIGITS`)."""
    frame = _floats_in_objects(frame, float_format)
    with atomic_open(path, "w") as handle:
        frame.to_csv(handle, index=False, float_format=float_format, lineterminator="\n")


def read_json(path: str | Path, missing: str = "file not found", *,
              kind: type | None = dict) -> Any:
    """Parse the JSON file ``path``; a missing or unreadable file, bytes that are not
    UTF-8, invalid JSON, or a top level that is not a ``kind`` (default: an object; None
    accepts any) raise :class:`~gradsched.errors.InputError` naming the file (and the
    line): never a traceback."""
    path = Path(path)
    if not path.is_file():
        raise InputError(missing, path=path)
    data = parse_json(read_text(path), path)
    if kind is not None and not isinstance(data, kind):
        want = {dict: "an object", list: "an array"}.get(kind, kind.__name__)
        raise InputError(f"the JSON top level must be {want}, not {_json_type(data)}",
                         path=path)
    return data


def parse_json(text: str, path: str | Path) -> Any:
    """The JSON document ``text`` (read from ``path``): the one JSON parser of every input.
    Invalid JSON raises :class:`~gradsched.errors.InputError` naming the file and line;
    nesting deeper than Python's recursion allows (``[[[[...]]]]`` 200 000 deep) is refused
    the same way, never a RecursionError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=path,
                         line=exc.lineno) from None
    except RecursionError:
        raise InputError("JSON nested too deeply (more levels than gradsched reads)",
                         path=path) from None


def _unique_keys_mapping(self: Any, node: Any, deep: bool = False) -> Any:
    """PyYAML's mapping constructor, refusing a key written twice in one mapping (PyYAML
    keeps the last silently: ``iters: 5`` then ``iters: 500`` would run 500)."""
    if isinstance(node, yaml.MappingNode):
        self.flatten_mapping(node)
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: PyYAML's own error follows
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {first.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark
    return yaml.SafeLoader.construct_mapping(self, node, deep=deep)


def _strict_yaml_loader() -> type:
    """A safe YAML loader whose plain scalars become numbers and booleans only when spelt
    as in YAML 1.2 and JSON: ``16``, ``-3``, ``2.5``, ``1e-3``, ``true``. PyYAML's YAML 1.1
    rules read ``1_6`` as 16, ``012`` as 10 (octal), ``1:30`` as 90 (base 60) and ``on``/
    ``yes`` as true: values a user did not write. Those stay strings, which the reader
    then refuses by field."""
    loader = type("StrictSafeLoader", (yaml.SafeLoader,),
                  {"construct_mapping": _unique_keys_mapping})
    dropped = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"}
    loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in dropped]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    loader.add_implicit_resolver("tag:yaml.org,2002:bool",
                                 re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                 list("tTfF"))
    loader.add_implicit_resolver("tag:yaml.org,2002:int",
                                 re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"),
                                 list("-+0123456789"))
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
                   r"|[0-9]+[eE][-+]?[0-9]+)$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
        list("-+0123456789."))
    return loader


MAX_YAML_NODES = 1_000_000
"""Most nodes a YAML document may hold once its aliases are expanded. An alias (``*a``)
stands for its anchor's whole value, so ten lines of nine aliases each describe 9^10
values (the "billion laughs"): PyYAML builds them shared, but every walk of the result
(the schema check, a printed value) visits each copy. A configuration file holds a few
hundred nodes; the bound is far above any real one."""


def _expanded_nodes(root: Any, path: str | Path) -> int:
    """The number of nodes of the YAML node graph ``root`` with every alias expanded,
    counted once per distinct node (memoised, so the count takes time proportional to the
    text, not to the expansion); above :data:`MAX_YAML_NODES` raises
    :class:`~gradsched.errors.InputError` naming the file and the line of the node."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = 1
            continue
        children = ([c for pair in node.value for c in pair]
                    if isinstance(node, yaml.MappingNode) else list(node.value))
        if not children_done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        total = 1 + sum(sizes.get(id(c), 0) for c in children)
        if total > MAX_YAML_NODES:
            raise InputError(
                f"more than {MAX_YAML_NODES} values once its aliases (*name) are expanded: "
                "an alias bomb, or a file far beyond any configuration; write the values out",
                path=path, line=node.start_mark.line + 1)
        sizes[id(node)] = total
    return sizes.get(id(root), 0)


def _load_bounded(text: str, path: str | Path) -> Any:
    """Compose the YAML document, bound its expanded size (:func:`_expanded_nodes`), then
    construct it: nothing walks the aliased values before the bound is checked."""
    loader = _strict_yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_nodes(node, path)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_yaml(text: str, path: str | Path) -> Any:
    """The YAML document ``text`` (read from ``path``) with the strict number and boolean
    spellings of :func:`_strict_yaml_loader` and at most :data:`MAX_YAML_NODES` values
    once aliases are expanded; invalid YAML raises
    :class:`~gradsched.errors.InputError` naming the file and line."""
    try:
        return _load_bounded(text, path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
                         path=path, line=mark.line + 1 if mark else None) from None
    except RecursionError as exc:
        raise InputError("YAML nested too deeply", path=path) from exc


def read_yaml(path: str | Path, missing: str = "file not found") -> Any:
    """Parse the YAML file ``path`` (:func:`parse_yaml`); a missing or unreadable file or
    bytes that are not UTF-8 raise :class:`~gradsched.errors.InputError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise InputError(missing, path=path)
    return parse_yaml(read_text(path), path)


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


MAX_INPUT_BYTES = 2 << 30
"""Largest input file, and largest decompressed size of a compressed one (2 GiB): a parsed
JSON trace takes several times its text in memory. Override with the environment variable
``GRADSCHED_MAX_INPUT_BYTES`` for a genuine input that is larger."""

INPUT_LIMIT_ENV = "GRADSCHED_MAX_INPUT_BYTES"


def max_input_bytes() -> int:
    """:data:`MAX_INPUT_BYTES`, or ``$GRADSCHED_MAX_INPUT_BYTES`` when set: plain ASCII
    digits, at least 1 (``0``, an empty value, ``1e9``, ``1_000`` and ``-1`` are refused
    with a :class:`~gradsched.errors.ConfigError` naming the variable)."""
    raw = os.environ.get(INPUT_LIMIT_ENV)
    if raw is None:
        return MAX_INPUT_BYTES
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ConfigError(f"${INPUT_LIMIT_ENV} {raw!r}: expected a positive number of bytes "
                          "(ASCII digits)")
    return int(raw)


def read_bytes(path: str | Path) -> bytes:
    """The bytes of ``path``: the one reader of every input file. A file larger than
    :func:`max_input_bytes` is refused before it is read, and an unreadable file raises
    :class:`~gradsched.errors.InputError` naming it (not a bare OSError)."""
    limit = max_input_bytes()
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > limit:
                raise InputError(f"{info.st_size} bytes is beyond the bound of {limit} bytes "
                                 f"per input (${INPUT_LIMIT_ENV}); split the input, or raise "
                                 f"${INPUT_LIMIT_ENV} if it is genuine", path=path)
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from exc
    if len(data) > limit:  # a device or a pipe that streams more than the bound
        raise InputError(f"more than {limit} bytes: beyond the bound per input "
                         f"(${INPUT_LIMIT_ENV})", path=path)
    return data


def read_text(path: str | Path, *, replace_errors: bool = False,
              universal_newlines: bool = False) -> str:
    """The UTF-8 text of ``path``; an unreadable file or bytes that are not UTF-8 raise
    :class:`~gradsched.errors.InputError` naming the file (and the line of the bad byte).
    ``replace_errors``: bad bytes become U+FFFD instead (a log); ``universal_newlines``:
    ``\r\n`` and ``\r`` become ``\n``, as :meth:`pathlib.Path.read_text` reads."""
    raw = read_bytes(path)
    if replace_errors:
        text = raw.decode("utf-8", errors="replace")
        return _universal(text) if universal_newlines else text
    try:
        text = raw.decode("utf-8")
        return _universal(text) if universal_newlines else text
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        path = Path(path)
        raise InputError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                         f"{exc.start}); save the file as UTF-8", path=path,
                         line=line) from exc


def _universal(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")
