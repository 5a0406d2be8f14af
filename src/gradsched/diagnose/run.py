"""``diagnose``: one or more ranks' traces of a step -> per-collective observed and
predicted exposure, the causes of the gaps and the fixes (package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.domain_notes import model_notes
from gradsched.diagnose.causes import CAUSE_COLUMNS, CAUSES, collective_causes, rank_causes
from gradsched.diagnose.fixes import fix_text
from gradsched.diagnose.layout import FRAMEWORKS, recognise
from gradsched.diagnose.observe import RankStep, observe_document
from gradsched.diagnose.predict import fit_trace, modelled_times, replay_rank
from gradsched.diagnose.ranks import align
from gradsched.errors import ConfigError, InputError
from gradsched.traces.importers.kineto.events import read_documents
from gradsched.traces.importers.kineto.intervals import union

FRAME_COLUMNS = ["rank", "index", "collective", "bytes", "world_size", "stream", "phase",
                 "ready_s", "launch_s", "start_s", "end_s", "duration_s", "transfer_s",
                 "wait_s", "last_rank", "exposed_s", "modelled_s", "model_source",
                 "predicted_start_s", "predicted_exposed_s", "causes"]
"""The per-collective table ``diagnose --csv`` writes (times in seconds from each rank's
``ProfilerStep`` start)."""


MIN_MODELLED_S = 1e-6
"""Collectives modelled shorter than this (a microsecond, Kineto's tick) do not enter the
band: their ratio is noise."""


@dataclass(frozen=True)
class Settings:
    """What ``gradsched diagnose`` was asked (checked once, by :meth:`check`)."""

    traces: tuple[str, ...]
    comm: str | None = None
    framework: str | None = None
    step: int | None = None

    def check(self) -> Settings:
        if not self.traces:
            raise ConfigError("give at least one trace")
        if self.framework is not None and self.framework not in FRAMEWORKS:
            raise ConfigError(f"--framework must be one of {', '.join(FRAMEWORKS)}, got "
                              f"{self.framework!r}")
        return self


@dataclass
class Diagnosis:
    """What ``diagnose`` found: per-collective frame, causes, fixes, layout and notes."""

    frame: pd.DataFrame
    causes: pd.DataFrame
    fixes: pd.DataFrame
    layout: dict[str, Any]
    framework: str
    notes: list[str] = field(default_factory=list)
    steps: list[RankStep] = field(default_factory=list)


def documents(traces: Sequence[str]) -> list[tuple[str, Any]]:
    """Every rank document of the given files (a ``.tar.gz`` holds one per rank)."""
    out = []
    for path in traces:
        if not Path(path).is_file():
            raise InputError("trace not found", path=path)
        out.extend(read_documents(path))
    return out


def diagnose_documents(docs: Sequence[tuple[str, Any]], settings: Settings,
                       model: CommModel | None = None) -> Diagnosis:
    """The diagnosis of rank documents (``(label, parsed JSON)``), e.g. planted ones."""
    steps = sorted((observe_document(doc, label, settings.step) for label, doc in docs),
                   key=lambda s: (s.rank, s.label))
    ranks = [s.rank for s in steps]
    if len(set(ranks)) != len(ranks):
        raise InputError(f"two traces of one rank ({ranks}): give each rank once",
                         path=steps[0].label)
    frame = align([s.frame for s in steps], [s.label for s in steps])
    world = next((s.world_size for s in steps if s.world_size), len(steps))
    fit = fit_trace(frame)
    modelled, sources = modelled_times(frame, model, fit, world)
    frame["modelled_s"] = np.round(modelled, 9)
    frame["model_source"] = sources
    frame["predicted_start_s"] = 0.0
    frame["predicted_exposed_s"] = 0.0
    priced = modelled > MIN_MODELLED_S
    ratio = frame["transfer_s"].to_numpy(dtype=float)[priced] / modelled[priced]
    band = (float(np.min(ratio)), float(np.max(ratio))) if len(ratio) else (1.0, 1.0)
    scaled: dict[float, np.ndarray] = {}
    for step in steps:
        mask = (frame["rank"] == step.rank).to_numpy()
        sub = frame[mask]
        start, exposed = replay_rank(sub, modelled[mask], list(step.compute))
        frame.loc[mask, "predicted_start_s"] = np.round(start, 9)
        frame.loc[mask, "predicted_exposed_s"] = np.round(exposed, 9)
        for factor in band:
            scaled.setdefault(factor, np.zeros(len(frame)))[mask] = replay_rank(
                sub, modelled[mask] * factor, list(step.compute))[1]
    rows: list[dict[str, Any]] = []
    for step in steps:
        rows += rank_causes(step, frame[frame["rank"] == step.rank])
    for row in frame.itertuples(index=False):
        rows += collective_causes(row, model is not None)
    causes = pd.DataFrame(rows, columns=CAUSE_COLUMNS)
    causes["order"] = causes["cause"].map(CAUSES.index)
    causes = causes.sort_values(["order", "rank", "index"]).drop(columns="order")
    causes = causes.reset_index(drop=True)
    named = causes[causes["index"] >= 0].groupby(["rank", "index"])["cause"].agg(
        lambda c: "+".join(dict.fromkeys(c)))
    frame["causes"] = [named.get((r, i), "") for r, i in zip(frame["rank"], frame["index"],
                                                              strict=True)]
    layout = recognise(frame[frame["rank"] == steps[0].rank])
    framework = settings.framework or ("fsdp2" if layout["layout"] == "fsdp2" else "ddp")
    fixes = _fixes(causes, frame, scaled, band, framework, all(s.cpu for s in steps))
    notes = _notes(steps, frame, model, settings, world, band)
    return Diagnosis(frame=frame[FRAME_COLUMNS], causes=causes, fixes=fixes, layout=layout,
                     framework=framework, notes=notes, steps=steps)


def _fixes(causes: pd.DataFrame, frame: pd.DataFrame, scaled: dict[float, np.ndarray],
           band: tuple[float, float], framework: str, cpu: bool) -> pd.DataFrame:
    """One row per cause named: the change, its predicted gain per step (on the worst rank:
    the time the cause explains there, at most the union of its collectives' intervals, as
    collectives on several streams or threads overlap each other) and the band (the replay
    with the comm times scaled, predict module)."""
    rows = []
    observed = frame["exposed_s"].to_numpy(dtype=float)
    for cause in CAUSES:
        hit = causes[causes["cause"] == cause]
        if hit.empty:
            continue
        gains, lo, hi = [], [], []
        for rank, group in hit.groupby("rank"):
            if (group["index"] < 0).any():
                mask = (frame["rank"] == rank).to_numpy()
            else:
                mask = (frame["rank"] == rank).to_numpy() & frame["index"].isin(
                    group["index"]).to_numpy()
            hit_rows = frame[mask]
            span = sum(e - s for s, e in union(zip(hit_rows["start_s"], hit_rows["end_s"],
                                                   strict=True)))
            gains.append(min(float(group["explained_s"].sum()), span))
            lo.append(float(np.clip(observed[mask] - scaled[band[1]][mask], 0, None).sum()))
            hi.append(float(np.clip(observed[mask] - scaled[band[0]][mask], 0, None).sum()))
        change = fix_text(cause, framework, cpu)
        if cause == "waiting-on-rank":
            waited = frame[frame["index"].isin(hit["index"])].drop_duplicates("index")
            counts = waited["last_rank"].value_counts()
            change = (f"rank {int(counts.index[0])} started last at {int(counts.iloc[0])} of "
                      f"the {len(waited)} collectives waited on; {change}")
        rows.append({"cause": cause, "ranks": " ".join(str(r) for r in sorted(hit["rank"]
                                                                              .unique())),
                     "collectives": int((hit["index"] >= 0).sum()),
                     "gain_s": round(max(gains), 9),
                     "gain_low_s": round(min(max(lo), max(gains)), 9),
                     "gain_high_s": round(max(max(hi), max(gains)), 9),
                     "change": change})
    return pd.DataFrame(rows, columns=["cause", "ranks", "collectives", "gain_s",
                                       "gain_low_s", "gain_high_s", "change"])


def _notes(steps: list[RankStep], frame: pd.DataFrame, model: CommModel | None,
           settings: Settings, world: int, band: tuple[float, float]) -> list[str]:
    notes = []
    if model is None:
        notes.append("comm model fitted on this trace's own collectives (in-sample: the "
                     "fastest transfer of each kind); give --comm SWEEP for a measured one")
    else:
        notes += model_notes(model, world, str(settings.comm))
        unpriced = sorted(set(frame.loc[frame["model_source"] == "trace-fit",
                                        "collective"]))
        if unpriced:
            sizes = model.world_sizes()
            held = f" (it holds world sizes {', '.join(map(str, sizes))})" if sizes else ""
            notes.append(f"{', '.join(unpriced)} at world size {world}: not priced by "
                         f"{settings.comm}{held}; priced by the trace-fitted model")
    if len(steps) == 1:
        notes.append("one rank's trace: a collective's time includes its wait for the other "
                     "ranks, which this trace cannot separate (give every rank's trace)")
    notes.append("each cause's gain is the most its removal recovers on the worst rank; "
                 "causes that explain the same exposed time do not add up")
    notes.append(f"band: observed/modelled transfer ratio {band[0]:.2f}-{band[1]:.2f} over "
                 "the trace's collectives")
    return notes


def diagnose(settings: Settings, model: CommModel | None = None) -> Diagnosis:
    """Read the traces of ``settings`` and diagnose them."""
    settings = settings.check()
    return diagnose_documents(documents(settings.traces), settings, model)
