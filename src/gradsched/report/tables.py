"""``gradsched report table NAME``: the tables built from one result CSV (or several,
concatenated), by name; each builder lives in its study's module and returns a frame of
formatted strings (units in every column header) that :func:`gradsched.report.latex.
write_table` renders as booktabs LaTeX and Markdown. A study's module is imported only when
its table is built: several of them draw figures too, and writing one table should not load
matplotlib and seaborn for the others (tests/test_lazy_imports.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.errors import InputError
from gradsched.io import write_text_atomic
from gradsched.report.collect import read_csv_or_empty
from gradsched.report.latex import to_latex, to_markdown, write_table

TABLES = {
    "captured-compute": "captures:captured_compute_table",
    "captured-comm": "captures:captured_comm_table",
    "fits": "fits:fits_table",
    "crossws": "fits:crossws_table",
    "replay": "replay:replay_table",
    "compare": "compare:compare_table",
    "topology": "topology:topology_table",
}
"""Each table's builder, ``module:function`` in :mod:`gradsched.report`."""


def table_builder(name: str) -> Callable[..., Any]:
    """The builder of table ``name`` (its study module imported now)."""
    module, function = TABLES[name].split(":")
    builder: Callable[..., Any] = getattr(importlib.import_module(f"gradsched.report.{module}"),
                                          function)
    return builder


def build_table(name: str, inputs: Sequence[str | Path], tex: str | Path, md: str | Path,
                title: str = "", families: Sequence[str] = (),
                calibrated: frozenset[str] = frozenset()) -> pd.DataFrame:
    """Build table ``name`` from its input CSV(s) (concatenated) and write both forms.

    ``families``: keep only the replay cases of these compute families (the ``family``
    column of ``report collect``), so that each family's table fits its page;
    ``calibrated``: the links a calibrated replay exists for, whose plain replay cases the
    replay table marks (:func:`gradsched.report.replay.replay_table`)."""
    frames = [read_csv_or_empty(p) for p in inputs]
    frames = [f for f in frames if not f.empty]
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if families and not data.empty:
        if "family" not in data.columns:
            raise InputError("no family column to select families from", path=inputs[0],
                             field="family")
        data = data[data["family"].isin(list(families))].reset_index(drop=True)
    if name == "replay" and not data.empty:  # the LaTeX twin counts a tie (tie_count_text)
        replay_table = table_builder("replay")
        table, align = replay_table(data, calibrated=calibrated)
        write_text_atomic(tex, to_latex(replay_table(data, ties="count",
                                                     calibrated=calibrated)[0], align,
                                        title or name))
        write_text_atomic(md, to_markdown(table, title or name))
        return table
    table, align = table_builder(name)(data if not data.empty else pd.DataFrame())
    write_table(table, tex, md, align=align, title=title or name)
    return table
