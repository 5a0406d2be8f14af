"""Per-tensor compute capture of a real PyTorch model (``gradsched capture compute``).

One training iteration is zero_grad + forward (with the loss) + backward + optimizer step
(SGD with momentum). The capture runs ``warmup`` iterations, then ``iters`` measured
iterations WITH timing hooks interleaved with ``iters`` iterations WITHOUT hooks (same
model, same batch), so the capture overhead is measured under the same machine load.

What is timed, and how
----------------------
* **Clock.** CPU: ``time.perf_counter_ns`` (wall clock, ``clock="wall"``) in the hooks,
  or, with ``clock="cpu"``, ``time.thread_time_ns``: the CPU time of the calling thread,
  which on a single-threaded capture (``threads=1``; CPU autograd runs on the calling
  thread, which the capture checks) is the compute time without the time spent waiting
  for a core on a shared, oversubscribed machine. Wall-clock iteration times are recorded
  too (``iteration_wall_s``, ``iteration_nohooks_wall_s``). CUDA: a ``torch.cuda.Event`` is
  recorded in each hook (no synchronisation in hooks); all elapsed times are resolved once
  at the end of the iteration, after one ``torch.cuda.synchronize()``.
* **Layers.** A *layer* is a module that directly owns (``recurse=False``) at least one
  trainable parameter that no earlier layer owns; layers are numbered in the order in
  which their forward *finishes* (post-hook), which is forward order for ordinary models.
  Parameters used by a module whose own forward never runs (a parent reads
  ``child.weight`` directly) are given to the deepest ancestor whose forward runs.
* **Forward attribution rule.** Forward-hook timestamps cut the forward pass into
  segments: each segment runs from the end of the previous parameterised module to the end
  of the next one, and is attributed to that next module. So the time of parameter-free
  modules (activations, pooling, reshapes, residual additions, attention softmax) goes to
  the *next* parameterised layer; the time after the last parameterised module (the loss)
  goes to the last one. A module whose parameters are all tied to an earlier layer (the
  GPT-2 / BERT output projection tied to the token embedding) gives its segments to the row
  of the tied tensor. A layer's time is put on its first row (usually ``.weight``); its
  other rows carry 0 (a layer's forward time is the sum over its rows). With this rule the
  per-row forward times of one iteration sum **exactly** to the measured forward time
  (forward start to loss available); the per-row *medians* sum to within noise of it.
* **Backward.** ``Tensor.register_post_accumulate_grad_hook`` timestamps each gradient as
  it becomes ready; the calling order is the ready order. ``backward_s`` of the i-th ready
  gradient is ``ready(i) - ready(i-1)`` (``ready(-1)`` = the call of ``loss.backward()``),
  so cumulative sums give ready times. The work after the last ready gradient (input-side
  gradients nobody needs, engine shutdown) is not on any row; it is kept in the sidecar as
  ``backward_tail_s``. The ready order must be the same in every measured iteration; if it
  is not, the most common order is used, only the iterations with that order contribute
  to ``backward_s``, and a warning is recorded.
* **Update.** ``update_s`` is the time of a single-tensor SGD-momentum step
  (``foreach=False``) of each parameter, timed one tensor at a time after the measured
  iterations (median over ``iters`` repetitions); it includes the per-call Python overhead.
  The real multi-tensor step of the iteration is in ``optimizer_step_s``.
* **Tied and frozen parameters.** A tied (shared) parameter is one gradient tensor: one
  row, named by its first name, with the other names listed in ``tied_parameters``.
  Parameters with ``requires_grad=False`` (frozen) and parameters that receive no gradient
  are excluded and listed in the sidecar (``excluded_parameters``).

The result is a validated :class:`~gradsched.traces.ComputeTrace` whose sidecar holds
``iteration_s`` (with hooks), ``iteration_nohooks_s``, ``forward_backward_s`` (with hooks)
and ``forward_backward_nohooks_s``, the capture overhead, the machine (CPU model, threads,
load average before and after) and the software versions.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gradsched.capture.compute_layout import Layout, discover
from gradsched.capture.compute_timing import (
    CpuClock,
    CudaClock,
    Plain,
    Runner,
    Sample,
    update_times,
)
from gradsched.capture.correction import CorrectionInputs, HookFree, correct
from gradsched.errors import ConfigError
from gradsched.provenance import load_average, machine_info, software_versions
from gradsched.traces.bundle import ComputeTrace
from gradsched.workloads import ModelSpec, build_model

CAPTURE_VERSION = "1"


@dataclass
class CaptureOptions:
    """Settings of one compute capture."""

    model: str
    batch_size: int
    device: str = "cpu"
    dtype: str = "fp32"
    seq_len: int | None = None
    warmup: int = 2
    iters: int = 5
    threads: int | None = None
    lr: float = 0.01
    momentum: float = 0.9
    measure_update: bool = True
    seed: int = 0
    machine_note: str = ""
    clock: str = "wall"  # wall | cpu (thread CPU time; CPU device, 1 thread)

    def check(self) -> None:
        """Refuse impossible settings with a clear message."""
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError(f"--device must be cpu or cuda, not {self.device!r}")
        if self.warmup < 1:
            raise ConfigError("--warmup must be >= 1 (the first iteration discovers the "
                              "layers and is never measured)")
        if self.iters < 1:
            raise ConfigError("--iters must be >= 1")
        if self.threads is not None and self.threads < 1:
            raise ConfigError("--threads must be >= 1")
        if self.clock not in ("wall", "cpu"):
            raise ConfigError(f"--clock must be wall or cpu, not {self.clock!r}")
        if self.clock == "cpu" and (self.device != "cpu" or self.threads != 1):
            raise ConfigError("--clock cpu (thread CPU time) needs --device cpu and "
                              "--threads 1: it only counts the calling thread")
        if self.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(
                    f"--device {self.device}: CUDA is not available here (torch "
                    f"{torch.__version__}, built for CUDA {torch.version.cuda or 'none'}, "
                    "sees no GPU); use --device cpu or run on a GPU node")


# ----------------------------------------------------------------------------- capture
def _stats(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-column median, 10th and 90th percentiles of a (iterations, rows) array."""
    return (np.median(values, axis=0), np.percentile(values, 10, axis=0),
            np.percentile(values, 90, axis=0))


def capture_compute(options: CaptureOptions,
                    progress: Callable[[str], None] | None = None) -> ComputeTrace:
    """Run the capture described by ``options``; return a validated compute trace."""
    run = _measure(options, progress or (lambda _msg: None))
    back = _backward(run.samples, len(run.layout.params))
    warnings = list(back.warnings)
    fwd_med, fwd_p10, fwd_p90 = _stats(np.stack([s.forward_rows for s in run.samples]))
    bwd_med, bwd_p10, bwd_p90 = _stats(back.increments)
    layout = run.layout
    frame = pd.DataFrame({
        "name": layout.names,
        "layer": layout.layer_of_row,
        "numel": [int(p.numel()) for p in layout.params],
        "bytes": [int(p.numel() * p.element_size()) for p in layout.params],
        "forward_s": fwd_med,
        "backward_s": bwd_med,
        "ready_order": back.ready_order,
        "update_s": run.update,
        "forward_p10_s": fwd_p10,
        "forward_p90_s": fwd_p90,
        "backward_p10_s": bwd_p10,
        "backward_p90_s": bwd_p90,
    })
    if layout.excluded:
        warnings.append(f"{len(layout.excluded)} parameters excluded (frozen or without "
                        "gradient); see excluded_parameters")
    meta = _sidecar(options, run, back, warnings, rows_bwd=float(bwd_med.sum()),
                    rows_fwd=float(fwd_med.sum()))
    trace = ComputeTrace.from_frame(frame, _rounded(meta))
    if not options.device.startswith("cuda"):
        return trace
    # CUDA: the hooks can slow a launch-bound iteration; rescale the rows to the hook-free
    # iterations of this run (gradsched.capture.correction), recording the factor and spread.
    plain_fwd = [p.forward_s for p in run.plains]
    plain_bwd = [p.backward_s for p in run.plains]
    spread = [HookFree("this run, fastest hook-free iteration", min(plain_fwd), min(plain_bwd)),
              HookFree("this run, slowest hook-free iteration", max(plain_fwd), max(plain_bwd))]
    corrected, _ = correct(trace, CorrectionInputs(samples=spread))
    return ComputeTrace.from_frame(corrected.frame, _rounded(corrected.meta))


@dataclass
class _Run:
    """What :func:`_measure` measured."""

    spec: ModelSpec
    layout: Layout
    clock: Any
    samples: list[Sample]
    plains: list[Plain]
    update: np.ndarray
    started: dt.datetime
    load_before: list[float] | None
    load_after: list[float] | None


def _measure(options: CaptureOptions, say: Callable[[str], None]) -> _Run:
    """Build the model, discover its layout, run the warm-up and the measured iterations
    (hooked and plain interleaved) and, if asked, the per-tensor update times."""
    import torch

    options.check()
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    load_before = load_average()
    started = dt.datetime.now(dt.UTC)
    spec = build_model(options.model, options.batch_size, device=options.device,
                       dtype=options.dtype, seq_len=options.seq_len, seed=options.seed)
    clock: Any = CudaClock(options.device) if options.device.startswith("cuda") \
        else CpuClock(cpu_time=options.clock == "cpu")
    batch = spec.make_batch()

    say(f"{options.model}: discovering layers (warmup 1/{options.warmup})")
    layout = discover(spec, batch)
    if clock.kind == "cpu-thread-time" and not layout.backward_on_caller:
        raise ConfigError("--clock cpu: backward ran on another thread than the caller's, "
                          "whose CPU time would be missed; use --clock wall")
    optimizer = torch.optim.SGD(layout.params, lr=options.lr, momentum=options.momentum)
    runner = Runner(spec, layout, optimizer, clock, batch)
    for i in range(1, options.warmup):
        say(f"{options.model}: warmup {i + 1}/{options.warmup}")
        runner.hooked()
        runner.plain()

    samples: list[Sample] = []
    plains: list[Plain] = []
    for i in range(options.iters):
        say(f"{options.model}: iteration {i + 1}/{options.iters} (with and without hooks)")
        samples.append(runner.hooked())
        plains.append(runner.plain())

    update = np.zeros(len(layout.params))
    if options.measure_update:
        say(f"{options.model}: per-tensor update times")
        update = update_times(layout, clock, options.iters, options.lr, options.momentum)
    return _Run(spec=spec, layout=layout, clock=clock, samples=samples, plains=plains,
                update=update, started=started, load_before=load_before,
                load_after=load_average())


@dataclass
class _Backward:
    """Backward times per row from the iterations with the most common ready order."""

    orders: collections.Counter[tuple[int, ...]]
    used: list[Sample]
    ready_order: np.ndarray
    increments: np.ndarray  # (iterations used, rows)
    warnings: list[str]


def _backward(samples: list[Sample], n: int) -> _Backward:
    """Ready order: the most common one; only its iterations give backward times."""
    warnings: list[str] = []
    orders = collections.Counter(s.order for s in samples)
    order, count = orders.most_common(1)[0]
    used = [s for s in samples if s.order == order]
    if len(orders) > 1:
        warnings.append(f"the gradient ready order differed between iterations "
                        f"({len(orders)} distinct orders); used the most common one "
                        f"({count} of {len(samples)} iterations) and only those iterations "
                        "for backward_s")
    ready_order = np.empty(n, dtype=np.int64)
    ready_order[list(order)] = np.arange(n)
    inc = np.empty((len(used), n))
    for k, s in enumerate(used):
        seq = s.ready_s[list(order)]
        steps = np.diff(np.concatenate([[0.0], seq]))
        inc[k, list(order)] = steps
    if (inc < 0).any():  # pragma: no cover - hooks fire in time order
        raise ConfigError("negative backward increment: the clock went backwards")
    return _Backward(orders=orders, used=used, ready_order=ready_order, increments=inc,
                     warnings=warnings)


def _sidecar(options: CaptureOptions, run: _Run, back: _Backward, warnings: list[str], *,
             rows_bwd: float, rows_fwd: float) -> dict[str, Any]:
    """The sidecar of a compute capture (unrounded).

    Longer than most functions here: it is one dict literal, the sidecar's keys in the
    order they are written, kept in one place so the format can be read at a glance.
    """
    spec, layout, clock = run.spec, run.layout, run.clock
    samples, plains, used, orders = run.samples, run.plains, back.used, back.orders

    def med(values: list[float]) -> float:
        return float(np.median(values))

    fb_hooks = med([s.forward_s + s.backward_s for s in samples])
    fb_plain = med([p.forward_s + p.backward_s for p in plains])
    it_hooks = med([s.iteration_s for s in samples])
    it_plain = med([p.iteration_s for p in plains])
    bwd_measured = med([s.backward_s for s in used])
    fwd_measured = med([s.forward_s for s in samples])
    machine = machine_info(options.device)
    if options.device == "cpu":
        device_text = f"cpu ({machine['cpu_model']}, {machine['torch_threads']} threads)"
    else:
        device_text = f"{options.device} ({machine['gpu']})"
    extra_sw = ("transformers",) if spec.family == "transformers" else ()
    shared = ("the machine was shared with other jobs (see load_average_*)"
              if options.device == "cpu" else "")
    meta: dict[str, Any] = {
        "kind": "compute",
        "model": options.model,
        "batch_size": options.batch_size,
        "device": device_text,
        "dtype": options.dtype,
        "world_size": 1,
        "software": software_versions(extra_sw),
        "capture_method": (
            "gradsched capture compute: module forward post-hooks and "
            "Tensor.register_post_accumulate_grad_hook, "
            + {"cpu-wall": "time.perf_counter_ns (wall clock)",
               "cpu-thread-time": "time.thread_time_ns (CPU time of the single compute "
                                  "thread: time spent waiting for a core on a shared "
                                  "machine is excluded)",
               "cuda": "CUDA events resolved once per iteration"}[clock.kind]
            + f"; medians over {options.iters} iterations after {options.warmup} warmup"),
        "iterations": options.iters,
        "date": run.started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": (f"measured by gradsched capture compute (version {CAPTURE_VERSION}) on "
                   f"{device_text}; random initialisation, synthetic inputs"
                   + (f"; {options.machine_note}" if options.machine_note else "")),
        "iteration_s": it_hooks,
        "iteration_nohooks_s": it_plain,
        "clock": clock.kind,
        "iteration_wall_s": med([s.wall_s for s in samples]),
        "iteration_nohooks_wall_s": med([p.wall_s for p in plains]),
        "capture_overhead": it_hooks / it_plain - 1.0,
        "forward_backward_s": fb_hooks,
        "forward_backward_nohooks_s": fb_plain,
        "forward_measured_s": fwd_measured,
        "forward_nohooks_s": med([p.forward_s for p in plains]),
        "backward_measured_s": bwd_measured,
        "backward_measured_min_s": float(min(s.backward_s for s in used)),
        "backward_measured_max_s": float(max(s.backward_s for s in used)),
        "backward_nohooks_s": med([p.backward_s for p in plains]),
        "backward_rows_sum_s": rows_bwd,
        "backward_rows_rel_error": rows_bwd / bwd_measured - 1.0,
        "forward_rows_sum_s": rows_fwd,
        "backward_tail_s": med([s.tail_s for s in used]),
        "optimizer_step_s": med([p.step_s for p in plains]),
        "optimizer": f"SGD(lr={options.lr}, momentum={options.momentum})",
        "update_measured": bool(options.measure_update),
        "update_method": ("single-tensor SGD-momentum step per parameter (foreach=False), "
                          f"median of {options.iters}, includes per-call overhead"
                          if options.measure_update else "not measured (update_s = 0)"),
        "forward_measured": True,
        "forward_rule": ("time of parameter-free modules goes to the next parameterised "
                         "layer; the loss goes to the last; rows sum to the forward time"),
        "ready_order_consistent": len(orders) == 1,
        "iterations_used_backward": len(used),
        "hook_calls_per_iteration": samples[0].hook_calls,
        "warmup": options.warmup,
        "seq_len": spec.seq_len,
        "threads": machine["torch_threads"],
        "machine": machine,
        "load_average_before": run.load_before,
        "load_average_after": run.load_after,
        "tied_parameters": layout.tied,
        "excluded_parameters": layout.excluded,
        "fallback_owners": layout.fallback_owners,
        "model_notes": spec.notes,
        "warnings": warnings,
        "capture_version": CAPTURE_VERSION,
        "notes": ("forward_s: per-row medians of hook-delimited segments (" +
                  "parameter-free work goes to the next parameterised layer). backward_s: "
                  "incremental time between ready gradients. update_s: see update_method. "
                  + shared).strip(),
    }
    return meta


def _rounded(obj: Any) -> Any:
    """Floats in the sidecar to 6 significant digits (readable, stable JSON)."""
    if isinstance(obj, float):
        return float(f"{obj:.6g}")
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


def default_stem(model: str, batch_size: int, device: str, dtype: str,
                 seq_len: int | None = None) -> str:
    """``resnet50-b32-cpu-fp32`` / ``bert-base-s128-b8-cpu-fp32``."""
    base = model.replace(":", "-").replace(".", "-")
    seq = f"-s{seq_len}" if seq_len else ""
    return f"{base}{seq}-b{batch_size}-{device.split(':')[0]}-{dtype}"
