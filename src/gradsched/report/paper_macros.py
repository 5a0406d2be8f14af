r"""Every prose macro of the paper in one ``\newcommand`` file: each study module computes
its own group (``<study>_macros``) of the frames it is given; this module gathers them and
:func:`gradsched.report.latex.write_macros` writes them (``gradsched report macros``).

The re-execution's statistics (case statistics, ``best`` against PyTorch DDP, the stock-DDP
comparison) are computed by the measuring side (:func:`gradsched.reexec.analysis.quoted`)
and passed in as frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from gradsched.report.architectures import architecture_macros
from gradsched.report.burst import burst_macros
from gradsched.report.calibrated import calibrated_gap_macros
from gradsched.report.captures import (
    cpu_capture_macros,
    gpu_capture_macros,
    gpu_validation_macros,
)
from gradsched.report.compare import compare_macros
from gradsched.report.fits import crossws_macros, fit_macros
from gradsched.report.gpu_generations import gpu_generation_macros
from gradsched.report.headline import headline_model_macros
from gradsched.report.host_check import host_check_macros
from gradsched.report.llm_scale import llm_setting_macros
from gradsched.report.quote_rule import calibrated_links
from gradsched.report.reexec import reexec_boot_macros, reexec_macros
from gradsched.report.replay import Headline, replay_macros
from gradsched.report.sharded import sharded_measured_macros
from gradsched.report.stock_ddp import (
    executor_bench_macros,
    reexec_versus_macros,
    stock_ddp_macros,
)
from gradsched.report.trace_facts import trace_fact_macros
from gradsched.report.tuned_caps import tuned_cap_macros
from gradsched.traces.bundle import CommTrace, ComputeTrace


@dataclass(frozen=True)
class ReexecFrames:
    """The re-execution's frames the prose quotes (the fields of
    :class:`gradsched.reexec.analysis.Quoted`, and the measured rows themselves)."""

    measured: pd.DataFrame | None = None
    """The rows of measured.csv."""
    cases: pd.DataFrame | None = None
    """Case statistics without the per-iteration data."""
    stats: pd.DataFrame | None = None
    """Case statistics with the bootstrap intervals (``reexec analyze --stats``)."""
    versus: pd.DataFrame | None = None
    """``best`` against PyTorch DDP and the executor's DDP plan, with intervals."""
    stock_ddp: pd.DataFrame | None = None
    """Stock DDP with a plan's per-bucket caps against the baselines."""
    level_pct: float | None = None
    """The bootstrap's confidence level, in percent."""
    replicates: int | None = None
    """The bootstrap's replicates."""


@dataclass(frozen=True)
class MacroInputs:
    """The frames of every study the prose quotes, each None when not given (its macros
    then read ``n/a``); built once by ``gradsched report macros``."""

    fits: pd.DataFrame | None = None
    cross: pd.DataFrame | None = None
    collected: pd.DataFrame | None = None
    compare: pd.DataFrame | None = None
    headline: Headline | None = None
    reexec: ReexecFrames | None = None
    executor_bench: dict | None = None
    architectures: list[dict] | None = None
    gpu_kineto: pd.DataFrame | None = None
    gpu_corrections: pd.DataFrame | None = None
    gpu_captures: dict[str, dict | None] | None = None
    compute_traces: list[ComputeTrace] | None = None
    """The committed compute traces whose facts the prose quotes (:mod:`.trace_facts`)."""
    sweeps: list[CommTrace] | None = None
    """The committed comm sweeps whose facts the prose quotes (:mod:`.trace_facts`)."""
    burst_sweep: CommTrace | None = None
    """The shaped sweep whose token-bucket burst the prose quotes (:mod:`.burst`)."""
    headline_models: pd.DataFrame | None = None
    headline_comm: str | None = None
    calibrated: pd.DataFrame | None = None
    captured: pd.DataFrame | None = None
    sharded_measured: pd.DataFrame | None = None
    host_check: pd.DataFrame | None = None


def all_macros(inputs: MacroInputs | None = None) -> dict[str, str]:
    """Every macro (name without prefix -> TeX text) of the studies' frames in ``inputs``
    (none given: every macro name, its text ``n/a`` where it needs data)."""
    i = inputs or MacroInputs()
    fits, cross, collected, compare, headline = (i.fits, i.cross, i.collected, i.compare,
                                                 i.headline)
    reexec, executor_bench, architectures = i.reexec, i.executor_bench, i.architectures
    gpu_kineto, gpu_corrections, gpu_captures = (i.gpu_kineto, i.gpu_corrections,
                                                 i.gpu_captures)
    compute_traces, sweeps, burst_sweep = i.compute_traces, i.sweeps, i.burst_sweep
    headline_models, headline_comm, calibrated = (i.headline_models, i.headline_comm,
                                                  i.calibrated)
    captured, sharded_measured, host_check = i.captured, i.sharded_measured, i.host_check
    reexec = reexec or ReexecFrames()
    out: dict[str, str] = {}
    out.update(fit_macros(fits))
    out.update(crossws_macros(cross))
    # the one quoting rule (report/quote_rule.py): the plain replay's rows of a link with a
    # calibrated replay are quoted from that replay
    links = calibrated_links(calibrated)
    out.update(replay_macros(collected, headline or Headline(), links))
    out.update(headline_model_macros(headline_models, fits, headline_comm))
    out.update(calibrated_gap_macros(calibrated))
    out.update(cpu_capture_macros(captured))
    out.update(gpu_generation_macros(collected, calibrated=links))
    out.update(compare_macros(compare))
    out.update(reexec_macros(reexec.cases, reexec.measured))
    out.update(reexec_boot_macros(reexec.stats, reexec.level_pct, reexec.replicates))
    out.update(reexec_versus_macros(reexec.versus))
    out.update(stock_ddp_macros(reexec.stock_ddp))
    out.update(sharded_measured_macros(sharded_measured))
    out.update(architecture_macros(architectures))
    out.update(executor_bench_macros(executor_bench))
    out.update(gpu_validation_macros(gpu_kineto, gpu_corrections))
    out.update(gpu_capture_macros(gpu_captures or {}))
    # --- facts quoted in the prose (trace_facts.py, burst.py, tuned_caps.py) ---
    out.update(trace_fact_macros(compute_traces or [], sweeps or []))
    out.update(burst_macros(burst_sweep))
    out.update(tuned_cap_macros(reexec.stats))
    out.update(llm_setting_macros())
    out.update(host_check_macros(host_check))
    return out
