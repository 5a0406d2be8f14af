"""Helpers shared by the ``gradsched report`` verbs: input errors that name the
file, and the read-a-CSV-write-a-table verbs.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradsched.commands._outputs import output_file
from gradsched.errors import InputError


def columns_named(func: Callable[[argparse.Namespace], int]
                   ) -> Callable[[argparse.Namespace], int]:
    """A result CSV without a column the command reads is an input error naming the file(s)
    and the column, not an internal KeyError."""
    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except KeyError as exc:
            paths = []
            for key, value in sorted(vars(args).items()):
                if key in ("input", "replay", "fits", "crossws", "compare") and value:
                    paths += map(str, value if isinstance(value, list) else [value])
            raise InputError(f"the input has no column {exc.args[0]!r}: is it the CSV this "
                             f"command reads? ({'; '.join(paths)})") from None
    return run


def table_from_csv(args: argparse.Namespace, name: str, make_table: Any) -> int:
    """Read a replay CSV (``--input``), write ``make_table``'s table as LaTeX + Markdown."""
    from gradsched.report.collect import read_csv_or_empty
    from gradsched.report.latex import write_table

    if not args.input.is_file():
        raise InputError(f"{name} CSV not found", path=args.input)
    table, align = make_table(read_csv_or_empty(args.input))
    write_table(table, args.tex, args.md, align=align, title=args.title or name)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def add_table_parser(sub: Any, name: str, *, help: str, input_help: str
                     ) -> argparse.ArgumentParser:
    """A table verb: ``--input`` (the file it formats), ``--tex`` and ``--md`` (the table,
    LaTeX and Markdown) and ``--title``; the caller sets ``func``."""
    p = sub.add_parser(name, help=help)
    p.add_argument("--input", type=Path, required=True, help=input_help)
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--title", default="")
    return p
