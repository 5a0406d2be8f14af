"""The planners as the report names them: display order and labels, and which of several
tied schedules a table or a macro credits as the fastest (:mod:`gradsched.ties`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gradsched.ties import tied_labels

# Display order and names of the planners (unknown names sort last, as they are).


ALGORITHM_ORDER = ("syncsgd", "wfbp", "ddp", "horovod", "bytescheduler", "mgwfbp", "oasr",
                   "dear", "contiguous_optimum", "search", "best")


ALGORITHM_LABELS = {
    "syncsgd": "SyncSGD", "wfbp": "WFBP", "ddp": "DDP", "horovod": "Horovod",
    "bytescheduler": "BytSched", "mgwfbp": "MG-WFBP", "oasr": "OASR", "dear": "DeAR",
    "contiguous_optimum": "Contig-opt", "search": "Search", "best": "Best",
    "optimal": "Search",  # the former name of ``search`` (older result files)
}


MODEL_LABELS = {"alpha-beta": "alpha-beta", "piecewise": "piecewise", "interp": "interp",
                "analytic": "analytic"}


NOT_CREDITED = ("best", "oasr")
"""Never named the fastest of a case: the oracle, and the reconstruction equal to the DP."""


TIE_SEP = " = "
"""Joins the names of schedules whose times tie (:func:`gradsched.ties.same_time`)."""


def algorithm_sort_key(name: str) -> tuple[int, str]:
    """Position of ``name`` in :data:`ALGORITHM_ORDER` (unknown names last, by name)."""
    return (ALGORITHM_ORDER.index(name) if name in ALGORITHM_ORDER else len(ALGORITHM_ORDER),
            name)


def algorithm_label(name: str) -> str:
    """The display name of planner ``name``: :data:`ALGORITHM_LABELS`, else the name
    capitalised with hyphens for underscores (a new planner ``greedy_merge`` heads its
    column ``Greedy-merge`` until it gets a label here)."""
    if name in ALGORITHM_LABELS:
        return ALGORITHM_LABELS[name]
    text = name.replace("_", "-")
    return text[:1].upper() + text[1:]


def fastest_algorithms(times: Mapping[str, float]) -> list[str]:
    """The credited algorithms (not :data:`NOT_CREDITED`) whose times tie for the fastest,
    in the usual order (:data:`ALGORITHM_ORDER`); empty when none has a time."""
    credited = sorted((a for a in times if a not in NOT_CREDITED), key=algorithm_sort_key)
    return tied_labels({a: float(times[a]) for a in credited})


def tie_text(algorithms: Sequence[str]) -> str:
    """Tied algorithms' labels joined by :data:`TIE_SEP` (``Contig-opt = Search``)."""
    return TIE_SEP.join(algorithm_label(a) for a in algorithms)


def tie_count_text(algorithms: Sequence[str]) -> str:
    """The one fastest algorithm's label, or ``5 tied`` for a tie: the LaTeX replay tables
    fill their line at 7 pt already (``paper/main.tex``, ``\\gsfit``), with no room for
    five names; their Markdown twins name every tied algorithm (:func:`tie_text`)."""
    return tie_text(algorithms) if len(algorithms) < 2 else f"{len(algorithms)} tied"
