"""The headline case replayed under each fitted comm model kind.

The real K80 pairing (B-Caffe GoogleNet on its own 10 Gb Ethernet cluster, P = 8) is the
paper's headline. Its comm trace is fitted by three model kinds (alpha-beta, piecewise,
interp; Section "Cost models") whose held-out errors on that trace differ, so the headline
is replayed once with each fitted model JSON (``results/fit/models/<stem>.<kind>.json``):
a statement that holds under all three does not rest on the choice of model.

Input: one replay result CSV per model kind. Output: a table (algorithm x kind, ``ms
(rank)``) and, per kind, the fastest schedule, its and MG-WFBP's speed-up over WFBP and
MG-WFBP's gap to the contiguous optimum and to ``search``, as a table and as prose macros.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.errors import InputError
from gradsched.intermediates import REPLAY, read_intermediate
from gradsched.report.algorithms import (
    algorithm_label,
    algorithm_sort_key,
    fastest_algorithms,
    tie_text,
)
from gradsched.report.formatting import fmt
from gradsched.report.latex import NA, camel, latex_escape, number, write_table
from gradsched.ties import tied_ranks

MODEL_KINDS = ("alpha-beta", "piecewise", "interp")
"""The fitted model kinds, in the order the paper introduces them."""


def read_model_runs(runs: list[tuple[str, Path]]) -> pd.DataFrame:
    """Long frame (model, algorithm, iteration_s) of one replay CSV per model kind."""
    parts = []
    for kind, path in runs:
        if kind not in MODEL_KINDS:
            raise InputError(f"unknown model kind {kind!r}: expected one of "
                             f"{', '.join(MODEL_KINDS)}", path=path)
        if not Path(path).is_file():
            raise InputError("replay result not found", path=path)
        frame = read_intermediate(path, (REPLAY,))
        parts.append(frame[["algorithm", "iteration_s"]].assign(model=kind))
    if not parts:
        raise InputError("no replay results given")
    return pd.concat(parts, ignore_index=True)


def _kinds(long: pd.DataFrame) -> list[str]:
    return [k for k in MODEL_KINDS if k in set(long["model"])]


def model_table(long: pd.DataFrame) -> pd.DataFrame:
    """Algorithms x model kinds: ``t [ms] (rank)`` cells, algorithms in the usual order;
    times that tie (:func:`gradsched.ties.same_time`) share a rank."""
    algorithms = sorted(long["algorithm"].unique(), key=algorithm_sort_key)
    out = pd.DataFrame({"algorithm": [algorithm_label(a) for a in algorithms]})
    for kind in _kinds(long):
        times = long[long["model"] == kind].set_index("algorithm")["iteration_s"]
        ranks = dict(zip(times.index, tied_ranks(times.to_list()), strict=True))
        out[f"{kind}: ms (rank)"] = [
            f"{fmt(times[a] * 1e3, 1)} ({ranks[a]})" if a in times.index else "--"
            for a in algorithms]
    return out


def per_model(long: pd.DataFrame) -> pd.DataFrame:
    """One row per model kind: the fastest credited schedule (``fastest``: the first, in the
    usual algorithm order, of those tied for the fastest, ``fastest_tied``: all of them; see
    :func:`gradsched.report.algorithms.fastest_algorithms`), its and MG-WFBP's speed-up over WFBP
    (T_wfbp / T), and MG-WFBP's gap in percent to the contiguous optimum and to ``search``
    (100 (T_mgwfbp / T_ref - 1))."""
    rows = []
    for kind in _kinds(long):
        t = long[long["model"] == kind].set_index("algorithm")["iteration_s"].astype(float)
        tied = fastest_algorithms(t.dropna().to_dict())
        fastest = tied[0]
        rows.append({
            "model": kind, "fastest": fastest, "fastest_tied": tuple(tied),
            "fastest_speedup": t["wfbp"] / t[fastest],
            "mgwfbp_speedup": t["wfbp"] / t["mgwfbp"],
            "mgwfbp_contig_gap_pct": 100.0 * (t["mgwfbp"] / t["contiguous_optimum"] - 1.0),
            "mgwfbp_search_gap_pct": 100.0 * (t["mgwfbp"] / t["search"] - 1.0),
        })
    return pd.DataFrame(rows)


def write_model_table(runs: list[tuple[str, Path]], tex: Path, md: Path,
                      title: str = "") -> pd.DataFrame:
    """Read, tabulate and write (LaTeX + Markdown)."""
    table = model_table(read_model_runs(runs))
    write_table(table, tex, md, title=title)
    return table


def headline_model_macros(long: pd.DataFrame | None, fits: pd.DataFrame | None = None,
                          comm_trace: str | None = None) -> dict[str, str]:
    """The headline case under each fitted comm model kind (:mod:`gradsched.report.
    headline`): per kind, the fastest schedule, its and MG-WFBP's speed-up over WFBP, MG-WFBP's
    gap to the contiguous optimum and to ``search``, and the kind's held-out error on the
    headline's comm trace (``HeadlineModel<Kind>...``); over the kinds, the range of each
    (``HeadlineModels...Min``/``Max``) and how many kinds agree on the fastest schedule."""
    fields = {"FastestSpeedupOverWfbp": ("fastest_speedup", 2),
              "MgwfbpSpeedupOverWfbp": ("mgwfbp_speedup", 2),
              "MgwfbpContigGapPct": ("mgwfbp_contig_gap_pct", 1),
              "MgwfbpSearchGapPct": ("mgwfbp_search_gap_pct", 1)}
    out = {f"HeadlineModel{camel(k)}{f}": NA for k in MODEL_KINDS
           for f in (*fields, "Fastest", "HeldoutMapePct")}
    out |= {f"HeadlineModels{f}{end}": NA for f in fields for end in ("Min", "Max")}
    out["HeadlineModelsNum"] = NA
    if fits is not None and not fits.empty and comm_trace:
        mine = fits[fits["trace"].astype(str) == comm_trace]
        for row in mine.itertuples(index=False):
            if row.model in MODEL_KINDS:
                out[f"HeadlineModel{camel(row.model)}HeldoutMapePct"] = number(
                    float(row.heldout_mape_pct))
    if long is None or long.empty:
        return out
    table = per_model(long)
    out["HeadlineModelsNum"] = str(len(table))
    for row in table.itertuples(index=False):
        key = "HeadlineModel" + camel(row.model)
        out[key + "Fastest"] = latex_escape(tie_text(row.fastest_tied))
        for name, (column, digits) in fields.items():
            out[key + name] = number(float(getattr(row, column)), digits)
    for name, (column, digits) in fields.items():
        out[f"HeadlineModels{name}Min"] = number(float(table[column].min()), digits)
        out[f"HeadlineModels{name}Max"] = number(float(table[column].max()), digits)
    return out
