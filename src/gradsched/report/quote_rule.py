"""The one rule for what a quoted number may rest on.

Every macro the paper and ``claims.md`` quote as a maximum, median, range or count of replay
rows, and every point a figure draws in colour, rests only on rows that pass
:func:`exclusion_reasons`; the other rows stay in the tables (marked) and in the figures
(drawn hollow and grey, named in the caption). A row is left out, for the first reason
that applies, when it is

``extrapolated``
    replayed at a world size no sweep measured, on the cross-world-size model
    (:class:`gradsched.costmodel.scaling.ScaledModel`; column ``extrapolated``);
``synthetic``
    replayed on a compute trace that is not a measurement (a FLOPs model,
    :mod:`gradsched.traces.flops`; column ``synthetic``);
``host-bound``
    replayed on a host-bound compute trace (``compute_bound_by == "host"``): its compute is
    set by the host's launch rate and does not carry across machines;
``uncalibrated``
    replayed without a calibration that exists for its link: the re-execution measured a
    per-collective CPU cost there (``paper/data/reexec/interference-<link>-p<P>.json``) that
    the plain replay does not charge; such a case is quoted from the calibrated replay
    (rule ``replay_calibrated``), with that calibration named;
``outside``
    mostly (more than :data:`~gradsched.costmodel.domain.MOSTLY_OUTSIDE_PCT` percent of its
    modelled communication time) priced outside the message sizes its comm model measured
    (:func:`gradsched.costmodel.domain.out_of_range_shares`).

A number compared across rows (a gap, a speed-up, a gain) is quotable only when every row
it divides passes (:func:`quotable_cases`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import pandas as pd

from gradsched.costmodel.domain import MOSTLY_OUTSIDE_PCT
from gradsched.report.collect import extrapolated_mask, host_bound_mask, outside_domain_mask

REASONS = {
    "extrapolated": "replayed at a world size no sweep measured (cross-world-size model)",
    "synthetic": "compute from a FLOPs model, not a measurement",
    "host-bound": "host-bound compute trace",
    "uncalibrated": "replayed without the per-collective cost the re-execution calibrated "
                    "for its link",
    "outside": f"more than {MOSTLY_OUTSIDE_PCT:g} % of its modelled communication priced "
               "outside the measured message sizes",
}
"""Why a row is left out of every quoted number, in the order the rule tests them."""

_LINK = re.compile(r"^(?:gloo-)?(?P<link>.+)-p\d+$")


def link_of(comm_stem: str) -> str:
    """The link of a CPU sweep's or calibrated case's stem: ``gloo-tbf1gbit-p2`` and
    ``tbf1gbit-p2`` -> ``tbf1gbit`` (the naming of ``traces/comm/cpu/`` and of rule
    ``replay_calibrated``'s outputs); any other stem is returned whole."""
    match = _LINK.match(str(comm_stem))
    return match.group("link") if match else str(comm_stem)


def calibrated_links(runs: pd.DataFrame | None) -> frozenset[str]:
    """The links a calibrated replay exists for, from its ``case`` column
    (``<compute>/<link>-p<P>``, :func:`gradsched.commands.report.paper._calibrated`)."""
    if runs is None or runs.empty or "case" not in runs:
        return frozenset()
    return frozenset(link_of(str(case).rsplit("/", 1)[-1]) for case in runs["case"].unique())


def _flag(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series(False, index=frame.index)
    return frame[column].map(lambda v: str(v).strip().lower() in ("true", "1"))


def exclusion_reasons(frame: pd.DataFrame,
                      calibrated: Iterable[str] = frozenset()) -> pd.Series:
    """Per row: the first reason of :data:`REASONS` that leaves it out of every quoted
    number, or ``""`` where the row may be quoted. ``calibrated``: the links a calibrated
    replay exists for (:func:`calibrated_links`); a row whose ``comm_file`` is a sweep of
    one of them is ``uncalibrated``."""
    links = frozenset(calibrated)
    tests = {
        "extrapolated": extrapolated_mask(frame),
        "synthetic": _flag(frame, "synthetic"),
        "host-bound": host_bound_mask(frame),
        "uncalibrated": (frame["comm_file"].map(lambda s: link_of(str(s)) in links)
                         if links and "comm_file" in frame
                         else pd.Series(False, index=frame.index)),
        "outside": outside_domain_mask(frame),
    }
    out = pd.Series("", index=frame.index, dtype=object)
    for reason in reversed(REASONS):  # the first reason in REASONS wins
        out = out.mask(tests[reason].to_numpy(dtype=bool), reason)
    return out


def quotable(frame: pd.DataFrame, calibrated: Iterable[str] = frozenset()) -> pd.Series:
    """True for the rows a quoted number may rest on (:func:`exclusion_reasons` empty)."""
    return exclusion_reasons(frame, calibrated) == ""


def quotable_rows(frame: pd.DataFrame, calibrated: Iterable[str] = frozenset()
                  ) -> pd.DataFrame:
    """The rows of ``frame`` a quoted number may rest on."""
    return frame[quotable(frame, calibrated).to_numpy(dtype=bool)]


def quotable_cases(frame: pd.DataFrame, keys: Sequence[str], algorithms: Sequence[str],
                   calibrated: Iterable[str] = frozenset()) -> pd.Series:
    """Per case (index: ``keys``): True where every one of ``algorithms`` was replayed and
    passes the rule, so that a number comparing them (a gap, a speed-up) may be quoted."""
    part = frame[frame["algorithm"].isin(list(algorithms))]
    flags = part.assign(ok=quotable(part, calibrated).to_numpy(dtype=bool))
    grouped = flags.groupby(list(keys), sort=True)
    return (grouped["ok"].all() & (grouped["algorithm"].nunique() == len(set(algorithms))))
