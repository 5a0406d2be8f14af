"""The planted-fault check: each fault of :mod:`gradsched.diagnose.plant` planted in a real
trace (SYNTHETIC traces, made in memory), diagnosed, and compared with the clean trace's
diagnosis. One row per (trace, fault):

* ``found``: the planted cause is named where it was planted (the rank for ``serialised``;
  the collective for ``launch-late`` and ``prefetch-missed``; for ``waiting-on-rank``, at
  least one other rank at that collective, and every rank that names it there naming the
  slowed rank: a rank whose wait was hidden behind its own compute has no exposure to
  explain);
* ``false_causes``: causes new against the clean trace that are neither the planted one
  nor ``waiting-on-rank`` on a multi-rank trace (where a stall on some ranks makes the
  others wait: a consequence, listed as ``knock_on``);
* ``applicable``: False with the reason where the trace offers no target (no forward
  collective that ran beside compute; a single rank for a slowed rank; a host so far ahead
  that the stall needed reorders the next step's launches into this one).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gradsched.diagnose import plant
from gradsched.diagnose.events import shared_events
from gradsched.diagnose.rank_step import RankStep
from gradsched.diagnose.run import Diagnosis, Settings, diagnose_documents

COLUMNS = ["trace", "device", "ranks", "fault", "applicable", "target", "found",
           "false_causes", "knock_on", "note"]

MAX_STALL_SHARE = 0.25
"""A launch stall longer than this share of the step is not planted: the host's lead is so
long that the stall reorders the next step's launches into this one."""


def _named(d: Diagnosis) -> set[tuple[str, int, int]]:
    return set(zip(d.causes["cause"], d.causes["rank"], d.causes["index"], strict=True))


def _row(trace: str, fault: str, **kw: Any) -> dict[str, Any]:
    row = {"trace": trace, "device": "", "ranks": "", "fault": fault, "applicable": True,
           "target": "", "found": False, "false_causes": "", "knock_on": "", "note": ""}
    row.update(kw)
    return row


def _compare(trace: str, fault: str, clean: Diagnosis, planted: Diagnosis, target: str,
             found: bool) -> dict[str, Any]:
    new = _named(planted) - _named(clean)
    multi = len(clean.steps) > 1
    other = sorted(n for n in new if n[0] != fault)
    knock = [n for n in other if multi and n[0] == "waiting-on-rank"]
    false = [n for n in other if n not in knock]
    fmt = ", ".join
    return _row(trace, fault, target=target, found=found,
                false_causes=fmt(f"{c}@{r}:{i}" for c, r, i in false),
                knock_on=fmt(f"{c}@{r}:{i}" for c, r, i in knock))


def check_trace(name: str, docs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Every fault planted in one real trace (module docstring)."""
    clean = diagnose_documents(docs, Settings(("-",)))
    settings = Settings(("-",), step=clean.steps[0].step)
    first: RankStep = clean.steps[0]
    ranks = [s.rank for s in clean.steps]
    rows = []
    d = diagnose_documents([(lbl, plant.serialise(doc, lbl)) for lbl, doc in docs], settings)
    found = all(("serialised", r, -1) in _named(d) for r in ranks)
    rows.append(_compare(name, "serialised", clean, d, "every rank", found))
    bt = plant.backward_target(first)
    if bt is None:
        rows.append(_row(name, "launch-late", applicable=False,
                         note="no backward collective launched by its ready time"))
    else:
        delay = max(plant.launch_delay_s(s, bt) for s in clean.steps)
        if delay > MAX_STALL_SHARE * first.step_s:
            rows.append(_row(name, "launch-late", applicable=False, target=f"collective {bt}",
                             note=f"the stall needed ({delay * 1e3:.1f} ms) exceeds a quarter "
                                  "of the step: the host leads the device by that much"))
        else:
            d = diagnose_documents([(lbl, plant.delay_launch(doc, lbl, bt, delay, first.step))
                                    for lbl, doc in docs], settings)
            found = all(("launch-late", r, bt) in _named(d) for r in ranks)
            rows.append(_compare(name, "launch-late", clean, d, f"collective {bt}", found))
    pt = plant.prefetch_target(first)
    if pt is None:
        rows.append(_row(name, "prefetch-missed", applicable=False,
                         note="no forward collective ran beside compute"))
    else:
        d = diagnose_documents([(lbl, plant.remove_prefetch(doc, lbl, pt, first.step))
                                for lbl, doc in docs], settings)
        found = all(("prefetch-missed", r, pt) in _named(d) for r in ranks)
        rows.append(_compare(name, "prefetch-missed", clean, d, f"collective {pt}", found))
    if len(docs) < 2 or bt is None:
        rows.append(_row(name, "waiting-on-rank", applicable=False,
                         note="one rank's trace" if len(docs) < 2 else "no target"))
    else:
        slow = len(docs) - 1
        dur = float(first.frame.loc[first.frame["index"] == bt, "duration_s"].iloc[0])
        d = diagnose_documents(plant.slow_rank(docs, slow, bt, plant.plant_delay_s(dur),
                                               first.step), settings)
        slow_rank = clean.steps[slow].rank
        hits = d.causes[(d.causes["cause"] == "waiting-on-rank") & (d.causes["index"] == bt)]
        names = hits["detail"].str.contains(f"for rank {slow_rank},")
        found = bool(len(hits)) and bool(names.all())
        rows.append(_compare(name, "waiting-on-rank", clean, d,
                             f"rank {slow_rank} at collective {bt}", found))
    world = first.world_size or len(ranks)
    for row in rows:
        row["device"] = first.device or "not recorded"
        row["ranks"] = f"{len(ranks)} of {world}"
    return rows


def planted_table(traces: dict[str, list[tuple[str, Any]]]) -> pd.DataFrame:
    """:func:`check_trace` over named traces (name -> rank documents), each trace's
    events checked once (:func:`gradsched.diagnose.events.shared_events`: the planted
    documents are copies of the real one)."""
    rows = []
    for name, docs in traces.items():
        with shared_events():
            rows += check_trace(name, docs)
    return pd.DataFrame(rows, columns=COLUMNS)
