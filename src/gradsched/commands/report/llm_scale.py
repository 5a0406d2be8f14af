"""``gradsched report llm-scale``: the table of what ``advise`` and ``advise --sharded``
answer for the published LLM shapes (:mod:`gradsched.report.llm_scale`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``llm-scale``."""
    p = rsub.add_parser("llm-scale", help="advise and advise --sharded on LLM shapes at "
                                          "scale (LaTeX + Markdown table)")
    p.add_argument("--model", nargs="+", required=True, help="the models' names, in order")
    p.add_argument("--advice", nargs="+", type=Path, required=True,
                   help="advise --json of each model")
    p.add_argument("--sharded", nargs="+", type=Path, required=True,
                   help="advise --sharded --json of each model")
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=_llm_scale)


def _llm_scale(args: argparse.Namespace) -> int:
    from gradsched.report.latex import write_table
    from gradsched.report.llm_scale import llm_scale_table, llm_scale_title

    table, align = llm_scale_table(args.model, args.advice, args.sharded)
    title = args.title or llm_scale_title(args.advice)
    write_table(table, args.tex, args.md, align=align, title=title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0
