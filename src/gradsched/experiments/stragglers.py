"""How much ranks' compute varies, and how well the expected-maximum model predicts the wait
(``gradsched study stragglers``; model: :mod:`gradsched.costmodel.stragglers`).

Measured (fit), on one or two H200 machines (``data/h200/README.md``):

* **process to process**: for each of the 18 configurations, the hook-free forward +
  backward (CUDA-event medians of 20 iterations) of every process that measured it: the
  capture's own no-hook iterations (``traces/compute/h200/<config>.meta.json``), a later
  process at 8 and at 16 threads (``kineto-steps/kineto-steps-summary.json``), a third
  process for five of them (``kineto/kineto-truth-summary.json``) and a second H200 machine
  for eight (``gpu-check/*.tar.gz``, ``truth/<config>.json``). cv = sample standard
  deviation over mean (3-5 values per configuration);
* **iteration to iteration** within one process: the 20 per-iteration forward + backward
  samples of the second machine's eight configurations;
* the class of a configuration: host-bound by the project's one definition
  (:mod:`gradsched.traces.host_bound`): the kineto-gpu importer's GPU busy share of its
  hook-free profiled step (``kineto-import-report.csv``, column ``gpu_busy``) below 0.8.

A class's cv is the root mean square of its configurations' cvs; the per-step cv is
``sqrt(cv_process^2 + cv_iteration^2)`` (a rank's offset and its step's jitter, independent).

Validated (kept apart): the eight ranks of one DLRM step on 8x V100 under DDP (PARAM's
``dlrm_kineto.tar.gz``, ``data/external/param``). The NCCL kernels of all ranks end within
a few microseconds of each other (one clock), so each collective's end is a
synchronisation point; the time from collective k-1's end to rank i's collective k kernel
is that rank's compute between the two, ``T_ik``. Observed wait share of interval k:
``(max_i T_ik - mean_i T_ik) / mean_i T_ik``; predicted ``cv e_8``. Interval 0 (from the
step's start) is left out: the previous synchronisation is not in the trace.
"""

from __future__ import annotations

import io
import math
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.admission import input_limit
from gradsched.costmodel.stragglers import expected_max_normal
from gradsched.errors import InputError
from gradsched.intermediates import read_csv_frame
from gradsched.io import parse_json, read_bytes, read_json
from gradsched.traces.host_bound import CPU_BOUND_SHARE
from gradsched.traces.importers.kineto.events import decode_trace_bytes, read_trace_json

BUSY_THRESHOLD = CPU_BOUND_SHARE
"""GPU busy share below which a configuration is host-bound (the one definition,
:data:`gradsched.traces.host_bound.CPU_BOUND_SHARE`)."""

WORLD_SIZES = (2, 4, 8, 16, 64, 128, 512, 1024)
"""The world sizes of the e_P table."""

DLRM_RANKS = 8


@dataclass(frozen=True)
class StragglerInputs:
    """Where the study reads its data: the H200 folder (``data/h200``), the H200 compute
    traces (``traces/compute/h200``), the DLRM archive (``dlrm_kineto.tar.gz``) and public
    Kineto traces with several profiler steps (step-to-step variation)."""

    h200: Path
    traces: Path
    dlrm: Path
    step_traces: tuple[Path, ...] = ()


def _fwd_bwd(medians: dict, path: Path, forward: str, backward: str, scale: float = 1.0
             ) -> float:
    try:
        return (float(medians[forward]) + float(medians[backward])) * scale
    except (KeyError, TypeError, ValueError):
        raise InputError(f"no {forward}/{backward}", path=path) from None


def _json_members(archive: Path, key: Callable[[str], str | None],
                  parse: Callable[[bytes, str], Any]) -> list[tuple[str, Any]]:
    """``[(key, parsed member)]`` of the gzipped tar ``archive``, in archive order, for
    each member whose name ``key`` maps to a key (None: skipped). The archive is read
    through the input gate (:func:`gradsched.io.read_bytes`) and opened in memory; its
    members' total size is bounded by :func:`gradsched.admission.input_limit`, as
    ``traces/importers/kineto/events.py:read_documents`` bounds them."""
    data = read_bytes(archive)
    out: list[tuple[str, Any]] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = [(k, m) for m in tar.getmembers()
                       if m.isfile() and (k := key(m.name)) is not None]
            limit = input_limit()
            if sum(m.size for _, m in members) > limit:
                raise InputError(f"{sum(m.size for _, m in members)} bytes of members: "
                                 f"beyond the bound of {limit} bytes per input", path=archive)
            for name, member in members:
                handle = tar.extractfile(member)
                if handle is not None:
                    out.append((name, parse(handle.read(), f"{archive}:{member.name}")))
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise InputError(f"unreadable archive: {exc}", path=archive) from None
    return out


def _utf8_json(raw: bytes, label: str) -> Any:
    try:
        return parse_json(raw.decode("utf-8"), label)
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}",
                         path=label) from None


def _truth_member(name: str) -> str | None:
    """``<config>`` of a ``<top>/truth/<config>.json`` member (not a Kineto trace)."""
    parts = name.split("/")
    if (len(parts) == 3 and parts[1] == "truth" and parts[2].endswith(".json")
            and not parts[2].endswith(".pt.trace.json")):
        return parts[2][:-5]
    return None


def _gpu_check_members(archive: Path) -> dict[str, dict]:
    """``truth/<config>.json`` of the gpu-check archive, by configuration."""
    return dict(_json_members(archive, _truth_member, _utf8_json))


def _busy_shares(report: Path) -> dict[str, float]:
    frame = read_csv_frame(report, required=("trace", "gpu_busy"))
    rows = frame[frame["trace"].str.startswith("kineto-steps/")]
    return {t.split("/", 1)[1]: float(b)
            for t, b in zip(rows["trace"], rows["gpu_busy"], strict=True)}


def h200_configurations(inputs: StragglerInputs) -> pd.DataFrame:
    """One row per H200 configuration: class, the processes' forward + backward (s), their
    cv, and the within-process iteration cv where per-iteration samples exist."""
    steps_path = inputs.h200 / "kineto-steps" / "kineto-steps-summary.json"
    truth_path = inputs.h200 / "kineto" / "kineto-truth-summary.json"
    steps, truth = read_json(steps_path), read_json(truth_path)
    busy = _busy_shares(inputs.h200 / "kineto-import-report.csv")
    archives = sorted((inputs.h200 / "gpu-check").glob("*.tar.gz"))
    if len(archives) != 1:
        raise InputError("expected one gpu-check archive", path=inputs.h200 / "gpu-check")
    second = _gpu_check_members(archives[0])
    rows = []
    for config in sorted(steps):
        meta_path = inputs.traces / f"{config}.meta.json"
        meta = read_json(meta_path)
        samples = [_fwd_bwd(meta, meta_path, "forward_nohooks_s", "backward_nohooks_s")]
        for threads in ("threads8", "threads16"):
            samples.append(_fwd_bwd(steps[config]["cuda_event_medians_s"][threads],
                                    steps_path, "forward", "backward"))
        if config in truth:
            samples.append(_fwd_bwd(truth[config]["cuda_event_medians_s"], truth_path,
                                    "forward", "backward"))
        iteration_cv = math.nan
        n_iterations = 0
        if config in second:
            record = second[config]
            samples.append(_fwd_bwd(record["median"], archives[0], "forward_ms",
                                    "backward_ms", 1e-3))
            per_iter = (np.asarray(record["samples"]["forward_ms"], dtype=float)
                        + np.asarray(record["samples"]["backward_ms"], dtype=float))
            iteration_cv = float(per_iter.std(ddof=1) / per_iter.mean())
            n_iterations = len(per_iter)
        if config not in busy:
            raise InputError(f"no busy share for {config}",
                             path=inputs.h200 / "kineto-import-report.csv")
        values = np.asarray(samples)
        rows.append({
            "config": config, "gpu_busy_share": busy[config],
            "device_class": "host-bound" if busy[config] < BUSY_THRESHOLD else "gpu-bound",
            "n_processes": len(values), "fwd_bwd_mean_s": float(values.mean()),
            "max_over_min": float(values.max() / values.min()),
            "process_cv": float(values.std(ddof=1) / values.mean()),
            "n_iterations": n_iterations, "iteration_cv": iteration_cv})
    return pd.DataFrame(rows)


def _rms(values: pd.Series) -> float:
    values = values.dropna()
    return float(np.sqrt(np.mean(np.square(values)))) if len(values) else math.nan


def class_fits(configs: pd.DataFrame) -> pd.DataFrame:
    """Per class: process cv, iteration cv (RMS over configurations), per-step cv."""
    rows = []
    for cls, group in configs.groupby("device_class", sort=True):
        process, iteration = _rms(group["process_cv"]), _rms(group["iteration_cv"])
        rows.append({"device_class": cls, "n_configs": len(group),
                     "n_process_values": int(group["n_processes"].sum()),
                     "process_cv": process,
                     "n_iteration_configs": int(group["iteration_cv"].notna().sum()),
                     "iteration_cv": iteration,
                     "step_cv": float(math.hypot(process, iteration))})
    return pd.DataFrame(rows)


def dlrm_intervals(archive: Path) -> tuple[pd.DataFrame, float]:
    """``T_ik`` of the DLRM step (module docstring): one row per (interval, rank), and the
    step's GPU busy share (merged compute-kernel time, NCCL kernels left out, over the span
    from the first kernel to the last, mean over ranks) that classes it."""
    ranks: dict[int, list[tuple[float, float]]] = {}
    busy = []

    def worker(name: str) -> str | None:
        base = name.rsplit("/", 1)[-1]
        return base if base.startswith("worker") and base.endswith(".json") else None

    try:
        for name, doc in _json_members(archive, worker, decode_trace_bytes):
            events = doc["traceEvents"]
            kernels = sorted((e for e in events if e.get("cat") == "kernel"),
                             key=lambda e: e["ts"])
            rank = int(name[len("worker"):].split("_", 1)[0])
            ranks[rank] = [(float(e["ts"]), float(e["ts"] + e["dur"])) for e in kernels
                           if str(e.get("name", "")).startswith("ncclKernel")]
            busy.append(_busy_share([e for e in kernels if not str(
                e.get("name", "")).startswith("ncclKernel")]))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"unreadable DLRM archive: {exc}", path=archive) from None
    counts = {len(v) for v in ranks.values()}
    if len(ranks) != DLRM_RANKS or len(counts) != 1:
        raise InputError(f"expected {DLRM_RANKS} ranks with the same number of NCCL kernels, "
                         f"got {len(ranks)} ranks with {sorted(counts)}", path=archive)
    rows = []
    for k in range(1, counts.pop()):
        sync = float(np.mean([ranks[r][k - 1][1] for r in ranks]))
        for rank in sorted(ranks):
            rows.append({"interval": k, "rank": rank,
                         "compute_s": (ranks[rank][k][0] - sync) * 1e-6})
    return pd.DataFrame(rows), float(np.mean(busy))


def _busy_share(kernels: list[dict]) -> float:
    """Merged kernel time over the span from the first (sorted) kernel to the last."""
    if not kernels:
        return math.nan
    start = float(kernels[0]["ts"])
    end = max(float(e["ts"] + e["dur"]) for e in kernels)
    return _merged(kernels) / (end - start) if end > start else math.nan


def step_jitter(path: Path) -> dict[str, object]:
    """Step-to-step variation of one public Kineto trace: the ``ProfilerStep#N`` durations
    from the first step within 10 % of their median (earlier ones are the profiler's
    partial warm-up steps), their cv, and the GPU busy share of those steps (merged
    compute-kernel time over their duration) that classes the trace."""
    try:
        events_meta = read_trace_json(path)
        events = events_meta["traceEvents"]
    except (KeyError, TypeError) as exc:
        raise InputError(f"unreadable Kineto trace: {exc}", path=path) from None
    steps = sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    durations = np.asarray([float(e["dur"]) for e in steps])
    if len(durations) < 3:
        raise InputError(f"{len(durations)} profiler steps: at least 3 needed", path=path)
    median = float(np.median(durations))
    first = int(np.argmax(np.abs(durations / median - 1) <= 0.1))
    kept = steps[first:]
    x = durations[first:] * 1e-6
    start, end = float(kept[0]["ts"]), float(kept[-1]["ts"] + kept[-1]["dur"])
    kernels = sorted((e for e in events if str(e.get("cat", "")).lower() == "kernel"
                      and start <= e["ts"] < end
                      and not str(e.get("name", "")).startswith("ncclKernel")),
                     key=lambda e: e["ts"])
    busy = _merged(kernels) / (end - start)
    info = events_meta.get("distributedInfo") or {}
    devices = events_meta.get("deviceProperties") or [{}]
    return {"steps": len(x), "step_mean_s": float(x.mean()),
            "gpu": str(devices[0].get("name", "GPU not recorded")),
            "world_size": int(info.get("world_size", 1)),
            "cv": float(x.std(ddof=1) / x.mean()), "gpu_busy_share": busy,
            "device_class": "host-bound" if busy < BUSY_THRESHOLD else "gpu-bound"}


def _merged(kernels: list[dict]) -> float:
    """Time covered by the union of the (sorted) kernels' intervals, microseconds."""
    merged, end = 0.0, -math.inf
    for e in kernels:
        s, t = float(e["ts"]), float(e["ts"] + e["dur"])
        if s > end:
            merged += t - s
        elif t > end:
            merged += t - end
        end = max(end, t)
    return merged


def interval_waits(intervals: pd.DataFrame) -> pd.DataFrame:
    """Per interval: mean compute, observed max - mean, and the ranks' sample cv."""
    g = intervals.groupby("interval")["compute_s"]
    out = pd.DataFrame({"mean_s": g.mean(), "max_s": g.max(), "std_s": g.std(ddof=1)})
    out["wait_s"] = out["max_s"] - out["mean_s"]
    return out.reset_index()


def empirical_expected_max(z: np.ndarray, p: int) -> float:
    """Expected largest of ``p`` draws with replacement from the values ``z`` (exactly:
    ``sum_j z_(j) [(j/n)^p - ((j-1)/n)^p]``); bounded by ``max(z)``, so at large ``p``
    it shows only what the sample can."""
    z = np.sort(np.asarray(z, dtype=float))
    n = len(z)
    j = np.arange(1, n + 1, dtype=float)
    weights = (j / n) ** p - ((j - 1) / n) ** p
    return float(np.dot(z, weights))


def _standardised_iterations(inputs: StragglerInputs) -> np.ndarray:
    archives = sorted((inputs.h200 / "gpu-check").glob("*.tar.gz"))
    out = []
    for record in _gpu_check_members(archives[0]).values():
        x = (np.asarray(record["samples"]["forward_ms"], dtype=float)
             + np.asarray(record["samples"]["backward_ms"], dtype=float))
        out.append((x - x.mean()) / x.std(ddof=1))
    return np.concatenate(out)


def rank_offset_share(intervals: pd.DataFrame) -> float:
    """Share of the ranks' standardised deviations that is a persistent per-rank offset
    (sum of squares of the rank means over the total, one-way by rank): 1 / (intervals)
    when the slow rank changes at random from one interval to the next, 1 when the same
    ranks are slow by the same amount everywhere (the model's assumption)."""
    frame = intervals.assign(z=_standardised_ranks(intervals))
    z = frame.pivot(index="rank", columns="interval", values="z").to_numpy()
    return float(z.shape[1] * np.square(z.mean(axis=1)).sum() / np.square(z).sum())


def _standardised_ranks(intervals: pd.DataFrame) -> np.ndarray:
    g = intervals.groupby("interval")["compute_s"]
    z = (intervals["compute_s"] - g.transform("mean")) / g.transform("std")
    return z.to_numpy()


def study(inputs: StragglerInputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The results frame (measurements, fits, validations; one row each) and the e_P frame
    (exact, asymptote, the empirical distributions' expected maximum)."""
    configs = h200_configurations(inputs)
    fits = class_fits(configs).set_index("device_class")
    intervals, dlrm_busy = dlrm_intervals(inputs.dlrm)
    waits = interval_waits(intervals)
    e8 = expected_max_normal(DLRM_RANKS)
    total_mean = float(waits["mean_s"].sum())
    observed = float(waits["wait_s"].sum()) / total_mean
    dlrm_cv = float(waits["std_s"].sum()) / total_mean
    dlrm_class = "host-bound" if dlrm_busy < BUSY_THRESHOLD else "gpu-bound"
    rows: list[dict[str, object]] = []

    def add(kind: str, source: str, cls: str, n: str, cv: float, predicted: float = math.nan,
            obs: float = math.nan) -> None:
        error = (predicted - obs) / obs * 100 if obs == obs and predicted == predicted \
            else math.nan
        rows.append({"kind": kind, "source": source, "device_class": cls, "samples": n,
                     "cv": cv, "predicted_wait_pct": predicted * 100,
                     "observed_wait_pct": obs * 100, "error_pct": error})

    for cls, fit in fits.iterrows():
        add("measured", "H200, process to process", str(cls),
            f"{int(fit.n_configs)} configs, {int(fit.n_process_values)} values", fit.process_cv)
        add("measured", "H200, iteration to iteration", str(cls),
            f"{int(fit.n_iteration_configs)} configs x 20 iterations", fit.iteration_cv)
        add("fit", "H200, per step (auto)", str(cls), f"{int(fit.n_configs)} configs", fit.step_cv)
    for path in inputs.step_traces:
        jitter = step_jitter(path)
        add("measured", f"{path.parent.name} ({jitter['gpu']}, P = "
            f"{jitter['world_size']}), step to step", str(jitter["device_class"]),
            f"{jitter['steps']} steps", float(jitter["cv"]))  # type: ignore[arg-type]
    add("measured", "DLRM 8xV100, rank to rank", dlrm_class,
        f"8 ranks x {len(waits)} intervals, 1 step", dlrm_cv)
    share = rank_offset_share(intervals)
    add("measured", "DLRM, persistent rank offset (share of the variance)", dlrm_class,
        f"share {share:.2f} (no offset: {1 / len(waits):.2f})", math.nan)
    for cls, fit in fits.iterrows():
        add("validation", "H200 fit -> DLRM 8 ranks", str(cls), "8 ranks x "
            f"{len(waits)} intervals", fit.step_cv, fit.step_cv * e8, observed)
    loo_errors = []
    for k in waits["interval"]:
        rest = waits[waits["interval"] != k]
        held = waits[waits["interval"] == k].iloc[0]
        cv_k = float(rest["std_s"].sum() / rest["mean_s"].sum())
        loo_errors.append(abs(cv_k * e8 * held.mean_s - held.wait_s) / held.wait_s * 100)
    loo_cvs = [float(waits[waits["interval"] != k]["std_s"].sum()
                     / waits[waits["interval"] != k]["mean_s"].sum())
               for k in waits["interval"]]
    add("validation", "DLRM, leave one interval out (median |error|)", dlrm_class,
        f"{len(waits)} folds of 8 ranks", float(np.median(loo_cvs)))
    rows[-1]["error_pct"] = float(np.median(loo_errors))
    add("validation", "DLRM, leave one interval out (worst |error|)", dlrm_class,
        f"{len(waits)} folds of 8 ranks", float(np.median(loo_cvs)))
    rows[-1]["error_pct"] = float(np.max(loo_errors))
    results = pd.DataFrame(rows)

    z_iter = _standardised_iterations(inputs)
    z_rank = _standardised_ranks(intervals)
    ep = pd.DataFrame([{
        "world_size": p, "e_P": expected_max_normal(p),
        "sqrt_2lnP": math.sqrt(2 * math.log(p)),
        "empirical_iterations_e_P": empirical_expected_max(z_iter, p),
        "empirical_ranks_e_P": empirical_expected_max(z_rank, p),
        "gpu_bound_factor": 1 + fits.loc["gpu-bound", "step_cv"] * expected_max_normal(p),
        "host_bound_factor": 1 + fits.loc["host-bound", "step_cv"] * expected_max_normal(p),
    } for p in WORLD_SIZES])
    ep.attrs["n_iteration_samples"] = len(z_iter)
    ep.attrs["n_rank_samples"] = len(z_rank)
    return results, ep
