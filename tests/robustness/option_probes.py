"""The machinery of the "no option is ignored" test (``test_every_option.py``): what an
entry of the registry (``option_effects.py``) may be, and how a probe is run and judged.

A :class:`Probe` runs ``gradsched.cli.main`` in-process twice, once without and once with
the option, each in a fresh empty working folder (outputs are named relative to it; inputs
live in the inputs folder ``{d}``, committed files under ``{R}``). The option is honoured
when what the probe compares (stdout, an output file or folder, or everything) differs; it
is refused when the run with it exits with status 2 and a last line ``... error: ...``
naming the option. Anything else is reported: ``ignored`` (exit 0, same output), or the
run failing another way. The run without the option is made twice and must give the same
output, so a difference is the option's and not the clock's.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import io
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Probe:
    """Run ``base`` and ``with_option`` (command lines, shell words; ``{d}``: the inputs
    folder, ``{R}``: the repository); ``compare``: ``stdout``, ``all`` (stdout and every
    file written), or a path relative to the working folder (a file, or a folder's files).
    ``expect``: ``changes`` or ``refused``.

    ``reaches``: for a command that starts ranks or measures (slow, or needing root), the
    function (``module.attr``) it hands the work to; the probe stops the command there
    (no rank starts) and compares what the command handed it: the option changes the
    work asked for, or is refused before it."""

    base: str
    with_option: str
    compare: str = "all"
    expect: str = "changes"
    base_code: int = 0
    reaches: str | None = None


@dataclass(frozen=True)
class Output:
    """An option naming where an output goes: ``path`` (relative to the working folder)
    is absent after ``base`` and written by ``with_option``."""

    base: str
    with_option: str
    path: str


@dataclass(frozen=True)
class CoveredBy:
    """The option of a multi-process or slow command, whose effect an existing test
    shows: ``test`` is ``tests/path.py::test_name``; its source (or the module-level names
    it uses) mentions the option."""

    test: str
    reason: str


@dataclass(frozen=True)
class Exempt:
    """``--help``, ``--version`` and purely cosmetic options."""

    reason: str


@dataclass(frozen=True)
class Unprobed:
    """Last resort: no fast probe and no test yet (each is listed in the report)."""

    reason: str


Entry = Probe | Output | CoveredBy | Exempt | Unprobed
Entries = Entry | tuple[Entry, ...]
"""A registry value: one entry, or several that must all hold (e.g. an option refused
where it cannot apply, and honoured where it can)."""


def each(entries: Entries) -> tuple[Entry, ...]:
    return entries if isinstance(entries, tuple) else (entries,)


def more(base: str, extra: str, **kwargs: object) -> Probe:
    """The probe of ``base`` against ``base`` plus ``extra``."""
    return Probe(base, f"{base} {extra}", **kwargs)  # type: ignore[arg-type]


def refused(base: str, extra: str, reaches: str | None = None) -> Probe:
    """The probe of an option ``base`` cannot use: refused with a reason."""
    return Probe(base, f"{base} {extra}", expect="refused", reaches=reaches)


# --------------------------------------------------------------------------- running


class Reached(BaseException):
    """Raised by the stand-in of a probe's ``reaches`` function (a BaseException, so that
    the command's own ``except Exception`` does not turn it into an exit status)."""


REACHED = -1
"""The exit status a run gets when it reached its ``reaches`` function."""

_VARYING = re.compile(r"/\.gradsched\.[^/']*\.staging|\.[^/']*\.staging[^/']*| at 0x[0-9a-f]+")
"""Temporary staging names and object addresses in a recorded call."""


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    files: dict[str, bytes] = field(default_factory=dict)
    call: str = ""  # what the ``reaches`` function was handed

    @property
    def last_line(self) -> str:
        lines = self.err.strip().splitlines()
        return lines[-1] if lines else ""


def argv_of(line: str, inputs: Path) -> list[str]:
    return [w.replace("{d}", str(inputs)).replace("{R}", str(REPO)) for w in shlex.split(line)]


def describe(value: object, depth: int = 0) -> str:
    """A text of ``value`` that changes when any of its data does: objects by their type
    and attributes (not their address), frames by their CSV, arrays by their values."""
    if depth > 8:
        return "..."
    if value is None or isinstance(value, str | int | float | bool | Path):
        return repr(value)
    if isinstance(value, list | tuple):
        return f"[{', '.join(describe(v, depth + 1) for v in value)}]"
    if isinstance(value, set | frozenset):
        return f"{{{', '.join(sorted(describe(v, depth + 1) for v in value))}}}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{describe(k, depth + 1)}: {describe(v, depth + 1)}"
                               for k, v in value.items()) + "}"
    kind = type(value).__name__
    if hasattr(value, "to_csv"):  # a pandas frame or series
        return f"{kind}({value.to_csv()})"  # type: ignore[attr-defined]
    if hasattr(value, "tolist"):  # a numpy array
        return f"{kind}({value.tolist()!r})"  # type: ignore[attr-defined]
    if callable(value) and not isinstance(value, type):
        return f"<{getattr(value, '__qualname__', kind)}>"
    fields = getattr(value, "__dict__", None)
    if fields is None and hasattr(value, "__slots__"):
        fields = {k: getattr(value, k) for k in value.__slots__ if hasattr(value, k)}
    if fields is None:
        return repr(value)
    return f"{kind}{describe(fields, depth + 1)}"


@contextlib.contextmanager
def _stand_in(target: str | None, calls: list[str]) -> Iterator[None]:
    """``target`` (``module.attr``) replaced by a recorder that notes its arguments and
    raises :class:`Reached`."""
    if target is None:
        yield
        return
    module_name, _, attr = target.rpartition(".")
    module = importlib.import_module(module_name)
    original = getattr(module, attr)

    def record(*args: object, **kwargs: object) -> None:
        calls.append(describe((args, dict(sorted(kwargs.items())))))
        raise Reached

    setattr(module, attr, record)
    try:
        yield
    finally:
        setattr(module, attr, original)


def run_cli(line: str, where: Path, inputs: Path, reaches: str | None = None) -> Run:
    """``gradsched.cli.main`` on ``line`` with ``where`` (created, empty) as the working
    folder; stdout, stderr and every file written there (``where`` itself spelled
    ``<run>`` in all of them). With ``reaches``, the run stops where that function is
    called (exit status :data:`REACHED`) and ``call`` is what it was handed."""
    from gradsched.cli import main

    where.mkdir(parents=True)
    out, err = io.StringIO(), io.StringIO()
    calls: list[str] = []
    old = Path.cwd()
    os.chdir(where)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                _stand_in(reaches, calls):
            try:
                code = main(argv_of(line, inputs))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except Reached:
                code = REACHED
    finally:
        os.chdir(old)
    here = str(where).encode()
    files = {str(p.relative_to(where)): p.read_bytes().replace(here, b"<run>")
             for p in sorted(where.rglob("*")) if p.is_file()}
    call = _VARYING.sub("~", "".join(calls).replace(str(where), "<run>"))
    return Run(code, out.getvalue().replace(str(where), "<run>"),
               err.getvalue().replace(str(where), "<run>"), files, call)


def artifact(run: Run, compare: str) -> object:
    if compare == "call":  # whether the command got there, and with what
        return run.code == REACHED, run.call
    if compare == "stdout":
        return run.out
    if compare == "all":
        return run.out, run.files
    return {k: v for k, v in run.files.items() if k == compare or k.startswith(f"{compare}/")}


class Runner:
    """Runs command lines in fresh folders under ``root``; every run is kept by its line
    (a base is shared by many probes, and one run may write the outputs of several)."""

    def __init__(self, root: Path, inputs: Path) -> None:
        self.root = root
        self.inputs = inputs
        self.count = 0
        self.runs: dict[tuple[str, str | None, int], Run] = {}

    def __call__(self, line: str, reaches: str | None = None, again: int = 0) -> Run:
        """The run of ``line`` (``again``: a further, independent run of it)."""
        key = (line, reaches, again)
        if key not in self.runs:
            self.count += 1
            self.runs[key] = run_cli(line, self.root / f"run{self.count:04d}", self.inputs,
                                     reaches)
        return self.runs[key]


@dataclass(frozen=True)
class Verdict:
    kind: str  # changes, refused, ignored, or what went wrong
    detail: str = ""


def _names_option(line: str, spellings: tuple[str, ...]) -> bool:
    """Whether ``line`` names the option: one of its spellings (``--seq-len``), or its
    dest or metavar as a word (``field 'model'``, ``seq_len 64``)."""
    return any(s in line if s.startswith("-") else re.search(rf"\b{re.escape(s)}\b", line)
               for s in spellings)


def judge(entry: Probe | Output, spellings: tuple[str, ...], runner: Runner) -> Verdict:
    """Run ``entry``; ``spellings``: the option's spellings (a refusal names one)."""
    reaches = entry.reaches if isinstance(entry, Probe) else None
    first = runner(entry.base, reaches)
    code = entry.base_code if isinstance(entry, Probe) else 0
    if first.code != code and not (reaches and first.code == REACHED):
        return Verdict("base failed", f"exit {first.code}: {first.err[-2000:]}")
    with_it = runner(entry.with_option, reaches)
    if "Traceback" in with_it.err or "internal error" in with_it.err:
        return Verdict("crashed", with_it.err[-2000:])
    if isinstance(entry, Output):
        if artifact(first, entry.path):
            return Verdict("base writes the path", entry.path)
        if with_it.code != 0:
            return Verdict("failed", f"exit {with_it.code}: {with_it.err[-2000:]}")
        if not artifact(with_it, entry.path):
            return Verdict("ignored", f"nothing written at {entry.path}: "
                           f"{sorted(with_it.files)}")
        return Verdict("writes")
    if with_it.code == 2 and "error:" in with_it.last_line \
            and _names_option(with_it.last_line, spellings):
        return Verdict("refused", with_it.last_line)
    if with_it.code != code and not (reaches and with_it.code == REACHED):
        return Verdict("failed", f"exit {with_it.code}: {with_it.err[-2000:]}")
    compare = "call" if reaches else entry.compare
    if artifact(with_it, compare) == artifact(first, compare):
        return Verdict("ignored", f"same {compare}, exit {with_it.code}")
    if artifact(runner(entry.base, reaches, again=1), compare) != artifact(first, compare):
        return Verdict("not reproducible", f"two runs of the base differ in {compare}")
    return Verdict("changes")


# --------------------------------------------------------------------------- CoveredBy


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node  # type: ignore[return-value]
    return None


def _top_level(tree: ast.Module) -> Iterator[tuple[set[str], ast.stmt]]:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield {t.id for t in targets if isinstance(t, ast.Name)}, node
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            yield {node.name}, node


@functools.lru_cache
def _parsed(file: Path) -> tuple[str, ast.Module]:
    text = file.read_text(encoding="utf-8")
    return text, ast.parse(text)


def covering_source(test: str) -> str:
    """The source of ``tests/path.py::test_name`` plus that of the module-level names
    (constants, helpers, fixtures) it uses; raises ``LookupError`` if it does not exist."""
    path, _, name = test.partition("::")
    file = REPO / path
    if not file.is_file():
        raise LookupError(f"{path} does not exist")
    text, tree = _parsed(file)
    func = _function(tree, name)
    if func is None:
        raise LookupError(f"{path} has no test {name}")
    used = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)} | {
        a.arg for a in func.args.args}
    parts = [ast.get_source_segment(text, func) or ""]
    parts += [ast.get_source_segment(text, node) or "" for names, node in _top_level(tree)
              if names & used and node is not func]
    return "\n".join(parts)
