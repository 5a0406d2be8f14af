"""Compare the pipeline's outputs with the committed expected-output manifest.

The manifest (``paper/expected-outputs.sha256``) is in ``sha256sum`` format: one
``<64 hex digits>  <path>`` line per output, paths relative to the repository root, ``#``
lines are comments; ``sha256sum -c paper/expected-outputs.sha256`` checks it as well. It
lists every output that ``make reproduce`` writes byte for byte the same on every run: the
tables (``paper/tables/*``), the macro files (``paper/generated/*.tex``),
``paper/generated/claims.md``, the results CSVs the tables and macros are made from, the
at-scale record the replay commands quote (``results/at-scale/record.json``), and the
figures whose bytes do not depend on the run (see ``PATTERNS`` and ``EXCLUDED``).

Usage::

    python tools/verify_outputs.py              # reproduced / differs / missing + summary
    python tools/verify_outputs.py --strict     # exit 1 when anything differs or is missing
    python tools/verify_outputs.py --diff PATH  # every changed line of one text output
    python tools/verify_outputs.py --update     # maintainers: rewrite the expected outputs

``make reproduce`` runs the first form after Snakemake (``STRICT=1`` gives the second);
``make update-expected`` is the last, for maintainers after a change that moves outputs: it
overwrites the expected outputs with the current ones, so it never checks a reproduction.
A malformed manifest line is an error naming the file and line (exit status 2).

A hash says *that* a file differs, not *how*. So ``--update`` also keeps a gzip'd copy of
every expected text output (the results CSVs, the tables, the macros and ``claims.md``)
under ``paper/expected/`` (``<path>.gz``, written without a name or a date, so an unchanged
file gives the same bytes and git stores it once; the 303 text outputs of 337 gzip to
0.73 MB), committed with the manifest. For a CSV
that differs, the check then names the columns that differ and, for numeric ones, the
largest relative difference ``|a - b| / max(|a|, |b|)`` (rows compared by position), so
that float noise (1e-16) tells itself apart from a changed result; for a table or macro
file, the first changed lines; ``--diff PATH`` prints them all (a unified diff).
"""

from __future__ import annotations

import argparse
import csv
import difflib
import gzip
import hashlib
import io
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gradsched.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = Path("paper/expected-outputs.sha256")
EXPECTED = Path("paper/expected")
"""Where ``--update`` keeps the expected text outputs, gzip'd, at their paths plus ``.gz``."""
TEXT_SUFFIXES = (".csv", ".md", ".tex", ".json")
"""The outputs kept as copies (text: what a diff can show); figures are not kept."""
SHOWN_LINES = 8
"""Changed lines of a differing table or macro file shown in the report (``--diff``: all)."""
# What the manifest covers: the paper's tables, macros and claims, every results CSV, and the
# figures' PNG and PDF files (matplotlib writes them without a date). Two full runs of commit
# 8e18e13 on the project VM (one incremental, one --forceall) wrote all 256 byte for byte the
# same. paper/main.pdf is left out: its bytes depend on the TeX installation.
PATTERNS = (
    "paper/tables/*",
    "paper/generated/*.tex",
    "paper/generated/claims.md",
    "results/**/*.csv",
    "results/at-scale/record.json",
    "paper/figures/*.pdf",
    "paper/figures/*.png",
)
# Outputs that PATTERNS selects but whose bytes may differ between two runs of the same commit
# (none today: the two runs above agreed on every file).
EXCLUDED: tuple[str, ...] = ()
LINE = re.compile(r"^([0-9a-f]{64}) [ *](\S.*)$")
HEADER = (
    "# Expected bytes of the outputs of `make reproduce` (sha256sum format; paths from the\n"
    "# repository root). Check: python tools/verify_outputs.py  (or: sha256sum -c FILE).\n"
    "# Maintainers, after a change that moves outputs: make update-expected (it overwrites\n"
    "# this file and paper/expected/ with the current outputs; it never checks a reproduction).\n"
)


@dataclass(frozen=True)
class Check:
    path: str
    status: str  # reproduced | differs | missing
    details: tuple[str, ...] = field(default=())  # how a CSV differs (see csv_differences)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(path: Path) -> dict[str, str]:
    """{relative path: sha256} of a manifest; a bad line raises InputError naming it."""
    if not path.is_file():
        raise InputError("expected-output manifest not found: it is committed with the "
                         "repository (git status paper/)", path=path)
    expected: dict[str, str] = {}
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip() or text.startswith("#"):
            continue
        match = LINE.match(text)
        if match is None:
            raise InputError(
                "expected '<64 lowercase hex digits>  <path>'", path=path, line=number
            )
        if match.group(2) in expected:
            raise InputError(f"{match.group(2)} is listed twice", path=path, line=number)
        expected[match.group(2)] = match.group(1)
    return expected


def current_outputs(root: Path) -> list[str]:
    """The outputs PATTERNS selects under ``root`` (sorted, EXCLUDED left out)."""
    found = {
        path.relative_to(root).as_posix()
        for pattern in PATTERNS
        for path in root.glob(pattern)
        if path.is_file()
    }
    return sorted(found - set(EXCLUDED))


def verify(root: Path, expected: dict[str, str], copies: Path | None = None) -> list[Check]:
    """Each expected output: reproduced, differs (with how, for a CSV whose expected copy is
    under ``copies``) or missing."""
    checks = []
    for relative, digest in sorted(expected.items()):
        path = root / relative
        if not path.is_file():
            checks.append(Check(relative, "missing"))
        elif sha256(path) == digest:
            checks.append(Check(relative, "reproduced"))
        else:
            checks.append(Check(relative, "differs", explain(path, relative, copies)))
    return checks


def explain(path: Path, relative: str, copies: Path | None) -> tuple[str, ...]:
    """How a differing output differs, when it is a text output with an expected copy: a
    CSV's columns (:func:`csv_differences`), else the first changed lines."""
    if not relative.endswith(TEXT_SUFFIXES) or copies is None:
        return ()
    copy = copies / (relative + ".gz")
    if not copy.is_file():
        return (f"no expected copy at {copy} to compare with (the copies are committed "
                "with the manifest: git status paper/expected)",)
    if relative.endswith(".csv"):
        with gzip.open(copy, "rt", encoding="utf-8", newline="") as handle:
            want = list(csv.reader(handle))
        with path.open(encoding="utf-8", newline="") as handle:
            got = list(csv.reader(handle))
        return tuple(csv_differences(want, got))
    lines = changed_lines(copy, path, relative)
    if len(lines) > SHOWN_LINES:
        lines = [*lines[:SHOWN_LINES], f"... {len(lines) - SHOWN_LINES} more changed lines"]
    return tuple(lines)


def changed_lines(copy: Path, path: Path, relative: str) -> list[str]:
    """The lines of ``path`` that differ from its gzip'd expected ``copy``: ``-`` expected,
    ``+`` this run (difflib's unified diff without its headers and context)."""
    want = gzip.decompress(copy.read_bytes()).decode("utf-8").splitlines()
    got = path.read_text(encoding="utf-8").splitlines()
    return [line for line in difflib.unified_diff(want, got, "expected/" + relative,
                                                  relative, n=0, lineterm="")
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def unified_diff(root: Path, copies: Path, relative: str) -> str:
    """``--diff PATH``: the unified diff of one text output against its expected copy."""
    copy = copies / (relative + ".gz")
    if not relative.endswith(TEXT_SUFFIXES):
        raise InputError("a figure has no expected copy to diff with: the figures follow "
                         "from the CSVs (compare those)", path=relative)
    if not copy.is_file():
        raise InputError("no expected copy (git status paper/expected)", path=copy)
    if not (root / relative).is_file():
        raise InputError("this run did not write it", path=root / relative)
    want = gzip.decompress(copy.read_bytes()).decode("utf-8").splitlines(keepends=True)
    got = (root / relative).read_text(encoding="utf-8").splitlines(keepends=True)
    text = "".join(difflib.unified_diff(want, got, "expected/" + relative, relative))
    return text or f"{relative}: the same as the expected copy\n"


def csv_differences(want: list[list[str]], got: list[list[str]]) -> list[str]:
    """Lines naming how ``got`` differs from ``want`` (rows of a CSV, the header first):
    columns added or removed, the row count, and per shared column the cells that differ
    (rows by position) with, where both sides are numbers, the largest relative
    difference."""
    if not want or not got:
        return ["one side is empty"]
    head_w, head_g = want[0], got[0]
    out = []
    removed = [c for c in head_w if c not in head_g]
    added = [c for c in head_g if c not in head_w]
    if removed:
        out.append("columns removed: " + ", ".join(removed))
    if added:
        out.append("columns added: " + ", ".join(added))
    rows_w, rows_g = want[1:], got[1:]
    if len(rows_w) != len(rows_g):
        out.append(f"rows: {len(rows_g)} instead of {len(rows_w)} (the first "
                   f"{min(len(rows_w), len(rows_g))} compared)")
    for column in (c for c in head_w if c in head_g):
        i, j = head_w.index(column), head_g.index(column)
        pairs = [(a[i] if i < len(a) else "", b[j] if j < len(b) else "")
                 for a, b in zip(rows_w, rows_g, strict=False)]
        line = column_difference(column, pairs)
        if line:
            out.append(line)
    return out or ["the cells are equal (the bytes differ: quoting, line ends or order)"]


def column_difference(column: str, pairs: list[tuple[str, str]]) -> str | None:
    """``column: N of M cells, max relative difference R`` (R only over numeric cells)."""
    differ = [(a, b) for a, b in pairs if a != b]
    if not differ:
        return None
    rel = [r for r in (relative_difference(a, b) for a, b in differ) if r is not None]
    text = f"{column}: {len(differ)} of {len(pairs)} cells differ"
    if rel:
        text += f", max relative difference {max(rel):.3g}"
    if len(rel) < len(differ):
        a, b = next((a, b) for a, b in differ if relative_difference(a, b) is None)
        text += f" (e.g. {a!r} -> {b!r})"
    return text


def relative_difference(a: str, b: str) -> float | None:
    """``|a - b| / max(|a|, |b|)`` of two numeric cells, ``None`` unless both are numbers."""
    try:
        x, y = float(a), float(b)
    except ValueError:
        return None
    if math.isnan(x) or math.isnan(y):
        return None if math.isnan(x) and math.isnan(y) else math.inf
    if x == y:
        return 0.0
    return abs(x - y) / max(abs(x), abs(y))


def gzip_bytes(data: bytes) -> bytes:
    """gzip without a file name or a date: the same input always gives the same bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9,
                       mtime=0) as handle:
        handle.write(data)
    return buffer.getvalue()


def write_copies(root: Path, paths: list[str], copies: Path) -> int:
    """Keep a gzip'd copy of every text output of ``paths`` (:data:`TEXT_SUFFIXES`) under
    ``copies`` (and no other file); the total size in bytes."""
    wanted = {copies / (p + ".gz"): root / p for p in paths if p.endswith(TEXT_SUFFIXES)}
    if copies.is_dir():
        for stale in copies.rglob("*"):
            if stale.is_file() and stale not in wanted:
                stale.unlink()
    total = 0
    for copy, source in sorted(wanted.items()):
        data = gzip_bytes(source.read_bytes())
        copy.parent.mkdir(parents=True, exist_ok=True)
        if not copy.is_file() or copy.read_bytes() != data:
            copy.write_bytes(data)
        total += len(data)
    if copies.is_dir():
        for folder in sorted((d for d in copies.rglob("*") if d.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
    return total


def write_manifest(root: Path, manifest: Path) -> int:
    """Rewrite ``manifest`` from the current outputs; the number of files listed."""
    paths = current_outputs(root)
    if not paths:
        raise InputError("no outputs to list: run `make reproduce` first", path=root)
    lines = [f"{sha256(root / p)}  {p}\n" for p in paths]
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(HEADER + "".join(lines), encoding="utf-8")
    return len(paths)


def summary(checks: list[Check]) -> str:
    counts = {s: sum(c.status == s for c in checks) for s in ("reproduced", "differs", "missing")}
    return (
        f"expected outputs: {counts['reproduced']} reproduced, {counts['differs']} differ, "
        f"{counts['missing']} missing (of {len(checks)})"
    )


ADVICE = (
    "How an output differs is listed under its path (against the expected copies committed "
    "in paper/expected/).\nEvery changed line of one: python tools/verify_outputs.py --diff "
    "PATH  (do not run `make update-expected`:\nit overwrites the expected outputs with "
    "these, and the difference is lost)."
)
"""Printed before the summary (the last line) when an output differs."""


def report(checks: list[Check], verbose: bool) -> str:
    """The table (every row with --verbose, else only the rows that are not reproduced),
    when an output differs how to see the differences, and the summary."""
    shown = [c for c in checks if verbose or c.status != "reproduced"]
    width = len("reproduced")
    rows = [f"{'status':<{width}}  path"]
    for c in shown:
        rows.append(f"{c.status:<{width}}  {c.path}")
        rows += [f"{'':<{width}}    {line}" for line in c.details]
    if any(c.status == "differs" for c in checks):
        rows.append(ADVICE)
    return "\n".join([*rows, summary(checks)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    parser.add_argument("--manifest", type=Path, default=None, help=f"default: {MANIFEST}")
    parser.add_argument("--expected", type=Path, default=None,
                        help=f"the expected text outputs' gzip'd copies (default: {EXPECTED})")
    parser.add_argument("--diff", metavar="PATH", default=None,
                        help="print the unified diff of one text output (a path from the "
                        "repository root) against its expected copy, and exit")
    parser.add_argument("--strict", action="store_true", help="exit 1 unless all reproduced")
    parser.add_argument("--update", action="store_true",
                        help="maintainers: overwrite the manifest and the expected copies "
                        "with the current outputs (never to check a reproduction)")
    parser.add_argument("--verbose", action="store_true", help="list reproduced files too")
    args = parser.parse_args(argv)
    manifest = args.manifest or args.root / MANIFEST
    copies = args.expected or args.root / EXPECTED
    try:
        if args.diff is not None:
            target = Path(args.diff)
            if target.is_absolute() and target.is_relative_to(args.root.resolve()):
                target = target.relative_to(args.root.resolve())
            print(unified_diff(args.root, copies, target.as_posix()), end="")
            return 0
        if args.update:
            count = write_manifest(args.root, manifest)
            size = write_copies(args.root, current_outputs(args.root), copies)
            print(f"wrote {manifest}: {count} outputs; {copies}: the text outputs gzip'd, "
                  f"{size / 1e6:.2f} MB (commit both)")
            return 0
        checks = verify(args.root, read_manifest(manifest), copies)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report(checks, args.verbose))
    failed = any(c.status != "reproduced" for c in checks)
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
