"""The stragglers tables (``gradsched study stragglers``): the measured cvs, the fits and
their validation; and e_P with the stretch factors per world size. Formatting only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.report.formatting import fmt
from gradsched.report.latex import write_table


def results_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per measurement, fit and validation (strings), and the alignment."""
    rows = [{"kind": rec.kind, "source": rec.source, "class": rec.device_class,
             "samples": rec.samples, "cv": fmt(rec.cv, 3),
             "predicted wait (%)": fmt(rec.predicted_wait_pct, 1),
             "observed wait (%)": fmt(rec.observed_wait_pct, 1),
             "error (%)": fmt(rec.error_pct, 1)}
            for rec in frame.itertuples(index=False)]
    return pd.DataFrame(rows), "llll" + "r" * 4


def ep_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """e_P exact, its asymptote, the empirical distributions' expected maxima, and the
    stretch factors of the two measured classes."""
    rows = [{"P": str(int(rec.world_size)), "e_P": fmt(rec.e_P, 4),
             "sqrt(2 ln P)": fmt(rec.sqrt_2lnP, 4),
             "empirical, H200 iterations": fmt(rec.empirical_iterations_e_P, 3),
             "empirical, DLRM ranks": fmt(rec.empirical_ranks_e_P, 3),
             "factor, GPU-bound": fmt(rec.gpu_bound_factor, 4),
             "factor, host-bound": fmt(rec.host_bound_factor, 4)}
            for rec in frame.itertuples(index=False)]
    return pd.DataFrame(rows), "r" * 7


def write_stragglers_tables(results: pd.DataFrame, ep: pd.DataFrame, tex: str | Path,
                            md: str | Path, ep_tex: str | Path, ep_md: str | Path) -> None:
    """Both tables, LaTeX and Markdown."""
    table, align = results_table(results)
    write_table(table, tex, md, align=align,
                title="Stragglers: measured cv, fits and validation")
    table, align = ep_table(ep)
    write_table(table, ep_tex, ep_md, align=align,
                title="Expected maximum of P ranks and the stretch factor 1 + cv e_P")
