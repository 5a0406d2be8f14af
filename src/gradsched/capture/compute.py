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
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

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


# ----------------------------------------------------------------------------- clocks
class _CpuClock:
    """Nanosecond timestamps from ``perf_counter_ns`` (wall) or ``thread_time_ns`` (the
    calling thread's CPU time); nothing to resolve."""

    def __init__(self, cpu_time: bool = False) -> None:
        self.kind = "cpu-thread-time" if cpu_time else "cpu-wall"
        self.mark: Callable[[], int] = time.thread_time_ns if cpu_time \
            else time.perf_counter_ns

    def finish(self) -> None:
        return None

    @staticmethod
    def seconds(a: Any, b: Any) -> float:
        return (b - a) * 1e-9


class _CudaClock:
    """CUDA events recorded on the current stream; resolved after one synchronize."""

    kind = "cuda"

    def __init__(self, device: str) -> None:
        import torch

        self._torch = torch
        self._device = torch.device(device)

    def mark(self) -> Any:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def finish(self) -> None:
        self._torch.cuda.synchronize(self._device)

    @staticmethod
    def seconds(a: Any, b: Any) -> float:
        return float(a.elapsed_time(b)) * 1e-3


# ----------------------------------------------------------------------------- discovery
@dataclass
class _Layout:
    """Which parameters are rows, which modules cut the forward, and where time goes."""

    params: list[Any]  # trainable parameters that get a gradient, row order
    names: list[str]
    layer_of_row: list[int]
    boundary_modules: list[Any]  # modules whose post-hook ends a forward segment
    target_row: dict[int, int]  # id(module) -> row that receives its segments
    last_module: Any
    tied: dict[str, list[str]] = field(default_factory=dict)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    fallback_owners: list[str] = field(default_factory=list)
    backward_on_caller: bool = True


def _discover(spec: ModelSpec, batch: Any) -> _Layout:
    """One forward/backward with hooks on every module: find layers, order and grads."""
    model = spec.model
    finished: list[Any] = []
    ran: dict[int, int] = {}

    def post(module: Any, _inp: Any, _out: Any) -> None:
        ran.setdefault(id(module), len(ran))
        finished.append(module)

    threads: set[int] = set()

    def ready(_p: Any) -> None:
        threads.add(threading.get_ident())

    handles = [m.register_forward_hook(post) for m in model.modules()]
    handles += [p.register_post_accumulate_grad_hook(ready) for p in model.parameters()
                if p.requires_grad]
    try:
        model.zero_grad(set_to_none=True)
        loss = spec.loss(model, batch)
        loss.backward()
    finally:
        for h in handles:
            h.remove()

    all_names: dict[int, list[str]] = collections.defaultdict(list)
    for name, p in model.named_parameters(remove_duplicate=False):
        all_names[id(p)].append(name)
    excluded: list[dict[str, Any]] = []
    trainable: dict[int, Any] = {}
    canonical: dict[int, str] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            excluded.append({"name": name, "numel": int(p.numel()), "reason": "frozen "
                             "(requires_grad=False)"})
        elif p.grad is None:
            excluded.append({"name": name, "numel": int(p.numel()), "reason": "no gradient "
                             "(not used in the forward pass)"})
        else:
            trainable[id(p)] = p
            canonical[id(p)] = name
    if not trainable:
        raise ConfigError(f"model {spec.name!r} has no trainable parameter that receives a "
                          "gradient")

    modules = dict(model.named_modules(remove_duplicate=False))
    owners: dict[int, list[Any]] = collections.defaultdict(list)  # id(module) -> params
    owner_mods: dict[int, Any] = {}
    for mod in model.modules():
        for p in mod._parameters.values():
            if p is not None and id(p) in trainable and all(q is not p for q in owners[id(mod)]):
                owners[id(mod)].append(p)
                owner_mods[id(mod)] = mod
    # Parameters none of whose owners ran: give them to the deepest ancestor that ran.
    fallback: list[str] = []
    covered = {id(p) for mid, ps in owners.items() if mid in ran for p in ps}
    for pid, p in trainable.items():
        if pid in covered:
            continue
        host = None
        for alias in all_names[pid]:
            parts = alias.split(".")[:-1]
            while parts and (".".join(parts) not in modules
                             or id(modules[".".join(parts)]) not in ran):
                parts.pop()
            cand = modules[".".join(parts)] if parts else model
            if host is None or len(parts) > host[0]:
                host = (len(parts), cand)
        assert host is not None
        mod = host[1]
        if id(mod) not in ran:
            raise ConfigError(f"parameter {canonical[pid]!r} gets a gradient but no module "
                              "owning it runs a forward")
        owners[id(mod)].append(p)
        owner_mods[id(mod)] = mod
        fallback.append(f"{canonical[pid]} -> {type(mod).__name__}")

    # Boundary modules in order of first forward completion.
    boundary = sorted((m for mid, m in owner_mods.items() if mid in ran and owners[mid]),
                      key=lambda m: _first_index(finished, m))
    params: list[Any] = []
    layer_of_row: list[int] = []
    row_of: dict[int, int] = {}
    target_row: dict[int, int] = {}
    layer = -1
    for mod in boundary:
        new = [p for p in owners[id(mod)] if id(p) not in row_of]
        if new:
            layer += 1
            target_row[id(mod)] = len(params)
            for p in new:
                row_of[id(p)] = len(params)
                params.append(p)
                layer_of_row.append(layer)
        else:
            target_row[id(mod)] = row_of[id(owners[id(mod)][0])]
    missing = [canonical[pid] for pid in trainable if pid not in row_of]
    if missing:  # pragma: no cover - every trainable parameter has a running owner above
        raise ConfigError(f"could not place parameters {missing[:5]} in forward order")
    last = max(boundary, key=lambda m: _last_index(finished, m))
    tied = {canonical[id(p)]: all_names[id(p)][1:] for p in params
            if len(set(all_names[id(p)])) > 1}
    return _Layout(params=params, names=[canonical[id(p)] for p in params],
                   layer_of_row=layer_of_row, boundary_modules=boundary,
                   target_row=target_row, last_module=last, tied=tied, excluded=excluded,
                   fallback_owners=fallback,
                   backward_on_caller=threads <= {threading.get_ident()})


def _first_index(seq: list[Any], item: Any) -> int:
    return next(i for i, x in enumerate(seq) if x is item)


def _last_index(seq: list[Any], item: Any) -> int:
    return max(i for i, x in enumerate(seq) if x is item)


# ----------------------------------------------------------------------------- iterations
@dataclass
class _Sample:
    """One hooked iteration, in seconds."""

    forward_rows: np.ndarray
    order: tuple[int, ...]
    ready_s: np.ndarray  # per row, from backward start
    forward_s: float
    backward_s: float
    step_s: float
    iteration_s: float
    tail_s: float
    hook_calls: int
    wall_s: float


@dataclass
class _Plain:
    forward_s: float
    backward_s: float
    step_s: float
    iteration_s: float
    wall_s: float


class _Runner:
    """Runs hooked and plain iterations of one model."""

    def __init__(self, spec: ModelSpec, layout: _Layout, optimizer: Any, clock: Any,
                 batch: Any) -> None:
        self.spec = spec
        self.layout = layout
        self.opt = optimizer
        self.clock = clock
        self.batch = batch
        self._fwd: list[tuple[int, Any]] = []
        self._bwd: list[tuple[int, Any]] = []
        self._handles: list[Any] = []

    def _install(self) -> None:
        mark = self.clock.mark
        fwd = self._fwd
        bwd = self._bwd
        for mod in self.layout.boundary_modules:
            row = self.layout.target_row[id(mod)]

            def post(_m: Any, _i: Any, _o: Any, row: int = row) -> None:
                fwd.append((row, mark()))

            self._handles.append(mod.register_forward_hook(post))
        for row, p in enumerate(self.layout.params):

            def ready(_p: Any, row: int = row) -> None:
                bwd.append((row, mark()))

            self._handles.append(p.register_post_accumulate_grad_hook(ready))

    def _remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _iteration(self) -> tuple[list[Any], float]:
        """One training iteration with clock marks before zero_grad, forward, backward,
        the step and after it; returns the marks and the wall time."""
        mark = self.clock.mark
        w0 = time.perf_counter()
        marks = [mark()]
        self.opt.zero_grad(set_to_none=True)
        marks.append(mark())
        loss = self.spec.loss(self.spec.model, self.batch)
        marks.append(mark())
        loss.backward()
        marks.append(mark())
        self.opt.step()
        marks.append(mark())
        self.clock.finish()
        return marks, time.perf_counter() - w0

    def plain(self) -> _Plain:
        """An iteration without hooks."""
        seconds = self.clock.seconds
        (t0, t1, t2, t3, t4), wall = self._iteration()
        return _Plain(seconds(t1, t2), seconds(t2, t3), seconds(t3, t4), seconds(t0, t4),
                      wall)

    def hooked(self) -> _Sample:
        """An iteration with the timing hooks installed."""
        n = len(self.layout.params)
        self._fwd.clear()
        self._bwd.clear()
        self._install()
        seconds = self.clock.seconds
        try:
            (t0, t1, t2, t3, t4), wall = self._iteration()
        finally:
            self._remove()
        forward_rows = np.zeros(n)
        prev = t1
        last_row = None
        for row, tok in self._fwd:
            forward_rows[row] += seconds(prev, tok)
            prev, last_row = tok, row
        if last_row is None:
            last_row = self.layout.target_row[id(self.layout.last_module)]
        forward_rows[last_row] += seconds(prev, t2)  # the loss and anything after
        ready = np.full(n, np.nan)
        order: list[int] = []
        last_tok = t2
        for row, tok in self._bwd:
            if np.isnan(ready[row]):
                order.append(row)
            ready[row] = seconds(t2, tok)  # a re-fired hook: the last firing counts
            last_tok = tok
        if len(order) != n:
            lost = [self.layout.names[i] for i in range(n) if np.isnan(ready[i])]
            raise ConfigError(f"gradients of {lost[:5]} did not become ready in a measured "
                              "iteration (the model's parameter use changes between "
                              "iterations)")
        return _Sample(forward_rows=forward_rows, order=tuple(order), ready_s=ready,
                       forward_s=seconds(t1, t2), backward_s=seconds(t2, t3),
                       step_s=seconds(t3, t4), iteration_s=seconds(t0, t4),
                       tail_s=seconds(last_tok, t3), hook_calls=len(self._fwd) + len(self._bwd),
                       wall_s=wall)


def _update_times(layout: _Layout, clock: Any, reps: int, lr: float,
                  momentum: float) -> np.ndarray:
    """Median single-tensor SGD-momentum step time of each parameter."""
    import torch

    opts = [torch.optim.SGD([p], lr=lr, momentum=momentum, foreach=False)
            for p in layout.params]
    for o in opts:  # first step creates the momentum buffer: not timed
        o.step()
    clock.finish()
    times = np.zeros((reps, len(opts)))
    for r in range(reps):
        marks = [clock.mark()]
        for o in opts:
            o.step()
            marks.append(clock.mark())
        clock.finish()
        times[r] = [clock.seconds(a, b) for a, b in itertools.pairwise(marks)]
    return np.median(times, axis=0)


# ----------------------------------------------------------------------------- capture
def _stats(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-column median, 10th and 90th percentiles of a (iterations, rows) array."""
    return (np.median(values, axis=0), np.percentile(values, 10, axis=0),
            np.percentile(values, 90, axis=0))


def capture_compute(options: CaptureOptions,
                    progress: Callable[[str], None] | None = None) -> ComputeTrace:
    """Run the capture described by ``options``; return a validated compute trace."""
    import torch

    options.check()
    say = progress or (lambda _msg: None)
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    load_before = load_average()
    started = dt.datetime.now(dt.UTC)
    spec = build_model(options.model, options.batch_size, device=options.device,
                       dtype=options.dtype, seq_len=options.seq_len, seed=options.seed)
    clock: Any = _CudaClock(options.device) if options.device.startswith("cuda") \
        else _CpuClock(cpu_time=options.clock == "cpu")
    batch = spec.make_batch()
    warnings: list[str] = []

    say(f"{options.model}: discovering layers (warmup 1/{options.warmup})")
    layout = _discover(spec, batch)
    if clock.kind == "cpu-thread-time" and not layout.backward_on_caller:
        raise ConfigError("--clock cpu: backward ran on another thread than the caller's, "
                          "whose CPU time would be missed; use --clock wall")
    optimizer = torch.optim.SGD(layout.params, lr=options.lr, momentum=options.momentum)
    runner = _Runner(spec, layout, optimizer, clock, batch)
    for i in range(1, options.warmup):
        say(f"{options.model}: warmup {i + 1}/{options.warmup}")
        runner.hooked()
        runner.plain()

    samples: list[_Sample] = []
    plains: list[_Plain] = []
    for i in range(options.iters):
        say(f"{options.model}: iteration {i + 1}/{options.iters} (with and without hooks)")
        samples.append(runner.hooked())
        plains.append(runner.plain())

    update = np.zeros(len(layout.params))
    if options.measure_update:
        say(f"{options.model}: per-tensor update times")
        update = _update_times(layout, clock, options.iters, options.lr, options.momentum)
    load_after = load_average()

    # Ready order: the most common one; only its iterations give backward times.
    orders = collections.Counter(s.order for s in samples)
    order, count = orders.most_common(1)[0]
    used = [s for s in samples if s.order == order]
    if len(orders) > 1:
        warnings.append(f"the gradient ready order differed between iterations "
                        f"({len(orders)} distinct orders); used the most common one "
                        f"({count} of {len(samples)} iterations) and only those iterations "
                        "for backward_s")
    n = len(layout.params)
    ready_order = np.empty(n, dtype=np.int64)
    ready_order[list(order)] = np.arange(n)
    inc = np.empty((len(used), n))
    for k, s in enumerate(used):
        seq = s.ready_s[list(order)]
        steps = np.diff(np.concatenate([[0.0], seq]))
        inc[k, list(order)] = steps
    if (inc < 0).any():  # pragma: no cover - hooks fire in time order
        raise ConfigError("negative backward increment: the clock went backwards")
    bwd_med, bwd_p10, bwd_p90 = _stats(inc)
    fwd = np.stack([s.forward_rows for s in samples])
    fwd_med, fwd_p10, fwd_p90 = _stats(fwd)

    frame = pd.DataFrame({
        "name": layout.names,
        "layer": layout.layer_of_row,
        "numel": [int(p.numel()) for p in layout.params],
        "bytes": [int(p.numel() * p.element_size()) for p in layout.params],
        "forward_s": fwd_med,
        "backward_s": bwd_med,
        "ready_order": ready_order,
        "update_s": update,
        "forward_p10_s": fwd_p10,
        "forward_p90_s": fwd_p90,
        "backward_p10_s": bwd_p10,
        "backward_p90_s": bwd_p90,
    })

    def med(values: list[float]) -> float:
        return float(np.median(values))

    fb_hooks = med([s.forward_s + s.backward_s for s in samples])
    fb_plain = med([p.forward_s + p.backward_s for p in plains])
    it_hooks = med([s.iteration_s for s in samples])
    it_plain = med([p.iteration_s for p in plains])
    bwd_measured = med([s.backward_s for s in used])
    rows_bwd = float(bwd_med.sum())
    fwd_measured = med([s.forward_s for s in samples])
    if layout.excluded:
        warnings.append(f"{len(layout.excluded)} parameters excluded (frozen or without "
                        "gradient); see excluded_parameters")
    device_text = options.device
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
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
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
        "forward_rows_sum_s": float(fwd_med.sum()),
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
        "load_average_before": load_before,
        "load_average_after": load_after,
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
    return ComputeTrace.from_frame(frame, _rounded(meta))


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
