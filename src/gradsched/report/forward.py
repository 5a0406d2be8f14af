"""How the ranking of the planners moves with the forward time a trace did not measure.

Input: replay result CSVs (``gradsched replay --forward-ratio R``) of one case at several
ratios R (forward = R x backward). Output: one row per algorithm with its
iteration time and rank at every ratio, so a reader sees at which ratio the order changes.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.errors import InputError
from gradsched.intermediates import REPLAY, read_intermediate
from gradsched.report.algorithms import algorithm_label, algorithm_sort_key
from gradsched.report.formatting import fmt
from gradsched.report.latex import write_table
from gradsched.ties import tied_ranks


def read_runs(runs: list[tuple[float, Path]]) -> pd.DataFrame:
    """Long frame (forward_ratio, algorithm, iteration_s) of the replay CSVs."""
    parts = []
    for ratio, path in runs:
        if not Path(path).is_file():
            raise InputError("replay result not found", path=path)
        frame = read_intermediate(path, (REPLAY,))
        missing = {"algorithm", "iteration_s"} - set(frame.columns)
        if missing:
            raise InputError(f"not a replay result (missing {', '.join(sorted(missing))})",
                             path=path)
        parts.append(frame[["algorithm", "iteration_s"]].assign(forward_ratio=float(ratio)))
    if not parts:
        raise InputError("no replay results given")
    return pd.concat(parts, ignore_index=True)


def forward_table(long: pd.DataFrame) -> pd.DataFrame:
    """Algorithms x ratios: ``t [ms] (rank)`` cells, algorithms in the usual order; times
    that tie (:func:`gradsched.ties.same_time`) share a rank."""
    algorithms = sorted(long["algorithm"].unique(), key=algorithm_sort_key)
    out = pd.DataFrame({"algorithm": [algorithm_label(a) for a in algorithms]})
    for ratio, part in sorted(long.groupby("forward_ratio"), key=lambda kv: kv[0]):
        times = part.set_index("algorithm")["iteration_s"]
        ranks = dict(zip(times.index, tied_ranks(times.to_list()), strict=True))
        out[f"fwd {ratio:g}x bwd: ms (rank)"] = [
            f"{fmt(times[a] * 1e3, 1)} ({ranks[a]})" if a in times.index else "--"
            for a in algorithms]
    return out


def write_forward_table(runs: list[tuple[float, Path]], tex: Path, md: Path,
                        title: str = "") -> pd.DataFrame:
    """Read, tabulate and write (LaTeX + Markdown)."""
    table = forward_table(read_runs(runs))
    write_table(table, tex, md, title=title)
    return table
