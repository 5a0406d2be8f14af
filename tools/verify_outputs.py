"""Compare the pipeline's outputs with the committed expected-output manifest.

The manifest (``paper/expected-outputs.sha256``) is in ``sha256sum`` format: one
``<64 hex digits>  <path>`` line per output, paths relative to the repository root, ``#``
lines are comments; ``sha256sum -c paper/expected-outputs.sha256`` checks it as well. It
lists every output that ``make reproduce`` writes byte for byte the same on every run: the
tables (``paper/tables/*``), the macro files (``paper/generated/*.tex``),
``paper/generated/claims.md``, the results CSVs the tables and macros are made from, and the
figures whose bytes do not depend on the run (see ``PATTERNS`` and ``EXCLUDED``).

Usage::

    python tools/verify_outputs.py            # table: reproduced / differs / missing + summary
    python tools/verify_outputs.py --strict   # exit 1 when anything differs or is missing
    python tools/verify_outputs.py --update   # rewrite the manifest from the current outputs

``make reproduce`` runs the first form after Snakemake (``STRICT=1`` gives the second);
``make update-expected`` is the third, for maintainers after a change that moves outputs.
A malformed manifest line is an error naming the file and line (exit status 2).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from gradsched.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = Path("paper/expected-outputs.sha256")
# What the manifest covers: the paper's tables, macros and claims, every results CSV, and the
# figures' PNG and PDF files (matplotlib writes them without a date). Two full runs of commit
# 8e18e13 on the project VM (one incremental, one --forceall) wrote all 256 byte for byte the
# same. paper/main.pdf is left out: its bytes depend on the TeX installation.
PATTERNS = (
    "paper/tables/*",
    "paper/generated/*.tex",
    "paper/generated/claims.md",
    "results/**/*.csv",
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
    "# Regenerate after a change that moves outputs: make update-expected\n"
)


@dataclass(frozen=True)
class Check:
    path: str
    status: str  # reproduced | differs | missing


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(path: Path) -> dict[str, str]:
    """{relative path: sha256} of a manifest; a bad line raises InputError naming it."""
    if not path.is_file():
        raise InputError("expected-output manifest not found (make update-expected)", path=path)
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


def verify(root: Path, expected: dict[str, str]) -> list[Check]:
    checks = []
    for relative, digest in sorted(expected.items()):
        path = root / relative
        if not path.is_file():
            checks.append(Check(relative, "missing"))
        else:
            checks.append(Check(relative, "reproduced" if sha256(path) == digest else "differs"))
    return checks


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


def report(checks: list[Check], verbose: bool) -> str:
    """The table (every row with --verbose, else only the rows that are not reproduced)."""
    shown = [c for c in checks if verbose or c.status != "reproduced"]
    width = len("reproduced")
    rows = [f"{'status':<{width}}  path"] + [f"{c.status:<{width}}  {c.path}" for c in shown]
    return "\n".join([*rows, summary(checks)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    parser.add_argument("--manifest", type=Path, default=None, help=f"default: {MANIFEST}")
    parser.add_argument("--strict", action="store_true", help="exit 1 unless all reproduced")
    parser.add_argument("--update", action="store_true", help="rewrite the manifest")
    parser.add_argument("--verbose", action="store_true", help="list reproduced files too")
    args = parser.parse_args(argv)
    manifest = args.manifest or args.root / MANIFEST
    try:
        if args.update:
            print(f"wrote {manifest}: {write_manifest(args.root, manifest)} outputs")
            return 0
        checks = verify(args.root, read_manifest(manifest))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report(checks, args.verbose))
    failed = any(c.status != "reproduced" for c in checks)
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
