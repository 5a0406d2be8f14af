"""Execute a :class:`~gradsched.plan.Plan` on a real ``torch.nn.Module`` in a process group.

The executor is what the replay (:mod:`gradsched.replay.engine`) models, made real:

* **Buckets.** Every plan bucket gets one flat buffer on its parameters' device. A
  ``register_post_accumulate_grad_hook`` on each parameter copies the gradient into its
  slice, divided by the world size (pre-division, as PyTorch DDP's reducer: Li et al.,
  "PyTorch Distributed", VLDB 2020), and releases ``.grad``; when every member of a
  bucket is in, the bucket is complete.
* **Collectives.** A complete ``all_reduce`` bucket launches ``chunks`` asynchronous
  all-reduces (``async_op=True``), one per equal partition of the flat buffer (padded with
  zeros to a multiple of ``chunks``): ByteScheduler's partitions (Peng et al., SOSP 2019).
  An ``rs_ag`` bucket launches reduce-scatters during backward and, after backward, the
  matching all-gathers, which the next forward waits for layer by layer: DeAR (Zhang,
  Shi et al., ICDCS 2023). The all-gathers gather the averaged gradient shards, so every
  rank holds the whole averaged gradient and runs the same optimizer update. A
  ``reduce_scatter`` bucket (a sharded optimizer's, :mod:`gradsched.plan`) runs the same
  way: the executor has no sharded optimizer, so it gathers the gradient shards back and
  ignores ``Plan.optimizer``/``param_sync`` (the same parameters, not the same timing).
* **Launch order.** A process group matches collectives by the order they are issued, so
  every rank must issue them in the same order. An order chosen from local readiness could
  pair different buckets on different ranks; the executor therefore issues the items of an
  iteration in one fixed sequence, each as soon as it and every item before it are ready
  (PyTorch DDP's rule). Without priorities the sequence is the plan order. With priorities
  it is the order a one-channel priority scheduler would start the items if bucket k became
  ready at step k of the backward and a chunk took time proportional to its size (see
  :func:`launch_order`): a ready high-priority chunk overtakes the backlog of
  lower-priority ones, as in ByteScheduler, but the decision is the same on every rank.
  The all-gathers are issued after backward, in forward order unless prioritised (the
  replay's rule). ``release_s`` and ``channels`` are timing hints of the model; the
  executor ignores them (one process-group queue). A bucket whose ``algorithm`` names one
  of :mod:`gradsched.collectives` (lp, ring, mst, rd, rhd) is all-reduced with that
  point-to-point implementation, blocking, inside the gradient hook (no overlap). A bucket
  whose ``algorithm`` is ``hierarchical`` (:mod:`gradsched.runtime.hierarchical`) or ``ps``
  (:mod:`gradsched.runtime.ps`) is handed to that reducer, which reduces the chunks on a
  background thread in issue order (overlapping backward).
* **Updates.** ``update="global"``: :meth:`PlanExecutor.step` waits for every collective,
  points each ``.grad`` at its averaged slice and runs the optimizer once (as DDP).
  ``update="per_layer"``: :meth:`PlanExecutor.step` only records that an update is due;
  a forward pre-hook on every module that owns parameters waits for that module's
  buckets and runs the optimizer on the module's parameters just before its forward
  (ByteScheduler, DeAR). Any per-parameter ``torch.optim`` optimizer works (SGD with
  momentum, Adam, AdamW, ...): the update of a module is the optimizer's own step run on
  a view of the optimizer that holds only that module's parameters and shares its state
  (built once, :mod:`gradsched.runtime.layer_steps`), so momentum and Adam state are
  exactly what one global step would produce; the optimizer's hyper-parameters (learning
  rate, ...) are those it had when :meth:`step` was called, so an LR scheduler stepped
  after :meth:`step` takes effect from the next iteration, as with a global update. The
  layers, their buckets and members are indexed once at construction: an iteration's
  host work grows with the modules updated, not with modules x parameters.
* **No lost update, no stale weights.** Pending per-layer updates are applied by
  :meth:`flush` (call it before saving or evaluating by other means than a forward, and at
  the end), by ``model.eval()`` / ``model.train()`` (the executor wraps them), inside
  ``with executor.synchronized():``, by the forward pre-hooks (so any forward, training or
  evaluation, sees up-to-date weights) and at the latest when the next backward starts.
  A parameter used in a forward before its owning module's forward ran (so before its
  update) is detected at the next backward and raises a clear error.
* **Unused parameters.** A parameter that gets no gradient in a backward does not block:
  at the end of backward its slice is zero-filled and its bucket completed, on every rank
  the same way. With ``find_unused_parameters=True`` a "used" flag per member travels in
  the bucket's padding (no extra collective), and a parameter unused on *every* rank keeps
  ``.grad = None`` so the optimizer skips it, which is the semantic of DDP's
  ``find_unused_parameters=True``. With ``False`` (default) it gets a zero gradient (the
  optimizer's momentum / weight decay still act on it).
* **Frozen parameters** (``requires_grad=False``) are not communicated; a plan naming one,
  or naming an unknown parameter, or missing a trainable one is refused with a clear error
  (:mod:`gradsched.runtime.bucket_layout` lays the plan onto the model).

* **Gradient accumulation.** ``with executor.no_sync():`` (as DDP's ``no_sync``) around
  the backward passes of the first ``k - 1`` micro-batches: the gradient hooks leave
  ``.grad`` to autograd, which accumulates into it, and issue nothing; the next backward
  outside ``no_sync`` finds each parameter's sum in ``.grad`` (the post-accumulate hook
  fires after autograd added the micro-batch's gradient), copies it into its bucket and
  communicates as usual; then :meth:`step`. Per-layer updates still run in the first
  micro-batch's forward (the pre-forward hooks), so they overlap that forward only. The
  gradient is the *sum* of the micro-batches' gradients, averaged over ranks: scale each
  micro-batch's loss by ``1 / k`` for the mean over the step's samples (what
  :mod:`gradsched.runtime.runners` does).

Works with gloo and NCCL (buffers live on the parameters' device). Every wait has a
timeout; a peer that never issues a collective ends the run with an error, not a hang.
With NCCL on a GPU a wait is a stream-side wait (``work.wait()``: the compute stream waits
for the collective, the host goes on issuing work) and the timeout is the process group's
(``init_process_group(timeout=...)``, NCCL's watchdog); a host-side wait with a timeout
would block the host, polling, until the collective ends, leaving the GPU idle while the
host catches up (PyTorch's ``ProcessGroupNCCL::WorkNCCL::wait``). Gloo waits on the host.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from gradsched.compression import DistComm
from gradsched.errors import ConfigError, GradschedError
from gradsched.plan import Plan, launch_order
from gradsched.runtime.bucket_layout import (
    REDUCER_ALGORITHMS,
    bucket_layout,
    bucket_slots,
    layer_index,
    parameter_owners,
)
from gradsched.runtime.bucket_state import BucketState
from gradsched.runtime.hierarchical import HierarchicalReducer
from gradsched.runtime.layer_steps import LayerSteps
from gradsched.runtime.step_collectives import (
    AG,
    AR,
    DONE,
    RS,
    StepStats,
    all_gather_into,
    blocking_allreduce,
    reduce_scatter_into,
)


class ExecutorError(GradschedError, RuntimeError):
    """The executor was misused, or a collective failed or timed out."""


@dataclass(frozen=True)
class Reduction:
    """How the executor reduces buckets other than by a plain all-reduce of the plan:
    ``compressor`` (:mod:`gradsched.compression`) compresses every plain all-reduce bucket;
    ``ranks_per_node`` sizes the nodes of the plan's ``hierarchical`` buckets (default:
    from the launch, :func:`gradsched.runtime.hierarchical.resolve_ranks_per_node`);
    ``ps_client`` (:class:`gradsched.runtime.ps.PSClient`) carries its ``ps`` buckets."""

    compressor: Any = None
    ranks_per_node: int | None = None
    ps_client: Any = None


NO_REDUCTION = Reduction()
"""Plain all-reduce buckets, one node, no parameter server."""


class PlanExecutor:
    """Run ``plan`` for ``model`` with ``optimizer`` in the default (or given) process group.

    Typical loop (both update modes)::

        ex = PlanExecutor(model, plan, optimizer)
        for x, y in loader:
            loss_fn(model(x), y).backward()
            ex.step()            # replaces optimizer.step() and optimizer.zero_grad()
        ex.flush()               # apply the last per-layer update

    ``find_unused_parameters``: see the module docstring. ``timeout_s`` bounds every wait
    for a collective. ``wrap_train_eval`` makes ``model.train()/eval()`` flush first.
    ``reduction``: a compressor, the node size of hierarchical buckets, or the client of
    parameter-server buckets (:class:`Reduction`).
    """

    def __init__(self, model: nn.Module, plan: Plan, optimizer: torch.optim.Optimizer, *,
                 process_group: Any = None, find_unused_parameters: bool = False,
                 timeout_s: float = 300.0, wrap_train_eval: bool = True,
                 reduction: Reduction = NO_REDUCTION) -> None:
        compressor = reduction.compressor
        if not dist.is_available() or not dist.is_initialized():
            raise ExecutorError("torch.distributed is not initialised: call "
                                "dist.init_process_group(...) before building the executor")
        if timeout_s <= 0:
            raise ConfigError("timeout_s must be > 0")
        self.model = model
        self.plan = plan
        self.optimizer = optimizer
        self.group = process_group
        self.world = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        self.find_unused = find_unused_parameters
        self.timeout = dt.timedelta(seconds=timeout_s)
        self.per_layer = plan.update == "per_layer"
        self._buckets = bucket_layout(model, plan, self.world, self.find_unused)
        self._slot = bucket_slots(self._buckets)
        self._order = launch_order(plan, [b.numel for b in self._buckets])
        self._reducers = self._make_reducers(reduction.ranks_per_node, reduction.ps_client)
        # Gradient compression (gradsched.compression): every plain all-reduce bucket (one
        # chunk, library algorithm, no used-flags) is compressed and reduced synchronously.
        self.compressor = compressor
        self._compress_state = self._compression_states(compressor)
        self._owner, self._layer_of = parameter_owners(model, self._slot)
        self._layers, self._module_layer = layer_index(self._buckets, self._slot, self._owner,
                                                       self._layer_of)
        self._layer_steps = (LayerSteps(optimizer, [[b.params[m] for b, m in members]
                                                    for members in self._layers])
                             if self.per_layer else None)
        self._set_stream_wait()
        self._gather_order = self._all_gather_order()
        self._handles = self._register_hooks()
        self._wrapped_train: Callable[..., Any] | None = None
        if wrap_train_eval:
            self._wrap_train(model)
        # iteration state
        self._in_backward = False
        self._backward_done = False
        self._next = 0
        self._due = [False] * len(self._layers)  # per-layer updates not yet applied
        self._n_due = 0
        self._stale_watch: set[nn.Parameter] = set()
        self._no_sync = False
        self.stats = StepStats()
        self.steps = 0
        self._reset_stats()

    # ------------------------------------------------------------------ construction
    def _compression_states(self, compressor: Any) -> dict[int, Any]:
        """The compressor's state of every plain all-reduce bucket (one chunk, library
        algorithm, no used-flags): those are compressed and reduced synchronously."""
        states: dict[int, Any] = {}
        if compressor is not None:
            for b in self._buckets:
                if (not b.decoupled and b.spec.chunks == 1 and b.spec.algorithm == "default"
                        and not b.with_flags):
                    states[b.index] = compressor.init_state(b.numel, like=b.flat)
        return states

    def _register_hooks(self) -> list[Any]:
        """A gradient hook on every bucketed parameter; with per-layer updates, a forward
        pre-hook on every module that owns parameters."""
        handles: list[Any] = []
        for p in self._slot:
            handles.append(p.register_post_accumulate_grad_hook(self._grad_hook))
        if self.per_layer:
            for module in {id(m): m for m in self._owner.values()}.values():
                handles.append(module.register_forward_pre_hook(self._pre_forward))
        return handles

    def _make_reducers(self, ranks_per_node: int | None, ps_client: Any) -> dict[str, Any]:
        """The reducers the plan's buckets name (``hierarchical``: subgroups of the
        default group, created here by every rank; ``ps``: the caller's client)."""
        wanted = {b.spec.algorithm for b in self._buckets} & set(REDUCER_ALGORITHMS)
        reducers: dict[str, Any] = {}
        if "hierarchical" in wanted:
            if self.group is not None:
                raise ConfigError("hierarchical buckets run over the default process group; "
                                  "do not pass process_group")
            reducers["hierarchical"] = HierarchicalReducer(self.world, ranks_per_node,
                                                           self.timeout)
        if "ps" in wanted:
            if ps_client is None:
                raise ConfigError(f"plan '{self.plan.algorithm}' has parameter-server "
                                  "buckets (algorithm: ps) but no reduction=Reduction("
                                  "ps_client=...) was given")
            reducers["ps"] = ps_client
        return reducers

    def _set_stream_wait(self) -> None:
        """NCCL buckets on a GPU wait on the CUDA stream (``work.wait()`` without a timeout
        orders the current stream after the collective; with one, NCCL also blocks the host
        until the collective ends, polling). Their timeout is the process group's own
        (``init_process_group(timeout=...)``, enforced by NCCL's watchdog)."""
        try:
            nccl = "nccl" in str(dist.get_backend(self.group)).lower()
        except (RuntimeError, ValueError):  # pragma: no cover - a group without a backend
            nccl = False
        for b in self._buckets:
            b.stream_wait = nccl and b.device.type == "cuda" and b.spec.algorithm == "default"

    def _all_gather_order(self) -> list[int]:
        """rs_ag buckets in the order their all-gathers are issued: priority if set, else
        the bucket's first layer in forward order (the replay's key)."""
        keys = []
        for b in self._buckets:
            if b.decoupled:
                first = min(self._layer_of.get(p, 0) for p in b.params)
                prio = b.spec.priority if b.spec.priority is not None else first
                keys.append((prio, b.index))
        return [k for _, k in sorted(keys)]

    def _wrap_train(self, model: nn.Module) -> None:
        original = model.train

        def train(mode: bool = True) -> nn.Module:
            self.flush()
            return original(mode)

        model.train = train  # type: ignore[method-assign]  # eval() calls self.train(False)
        self._wrapped_train = original

    # ------------------------------------------------------------------ public API
    @property
    def world_size(self) -> int:
        return self.world

    def expected_stats(self) -> dict[str, dict[str, int]]:
        """Collectives and bytes one iteration issues (from the layout)."""
        counts = {AR: 0, RS: 0, AG: 0}
        nbytes = {AR: 0, RS: 0, AG: 0}
        for b in self._buckets:
            size = b.chunk_numel * b.flat.element_size()
            kinds = (RS, AG) if b.decoupled else (AR,)
            for kind in kinds:
                counts[kind] += b.spec.chunks
                nbytes[kind] += b.spec.chunks * size
        return {"collectives": counts, "bytes": nbytes}

    def step(self) -> None:
        """End the iteration: replaces ``optimizer.step()`` + ``optimizer.zero_grad()``.

        Global update: wait for all communication and step the optimizer. Per-layer update:
        record the update; it runs in the next forward (or :meth:`flush`).
        """
        if not self._backward_done:
            # No gradient arrived on this rank (e.g. every parameter unused): complete the
            # iteration now so that the peers' collectives are matched.
            if not self._in_backward:
                self._begin_backward()
            self._end_backward()
        self._backward_done = False
        self.steps += 1
        if self.per_layer:
            self._layer_steps.record()  # type: ignore[union-attr]
            due = self._due
            for layer in range(len(due)):
                due[layer] = True
            self._n_due = len(due)
            return
        self._wait_all()
        for b in self._buckets:
            self._set_grads(b)
        self.optimizer.step()
        self._release_grads(self._slot)

    def synchronize_grads(self) -> None:
        """Global update only: wait for communication and leave the averaged gradients in
        ``.grad`` (views of the bucket buffers) without stepping, e.g. to clip them; then
        call ``optimizer.step()`` yourself and :meth:`finish_manual_step`."""
        if self.per_layer:
            raise ExecutorError("synchronize_grads() needs a plan with update='global'")
        if not self._backward_done:
            if not self._in_backward:
                self._begin_backward()
            self._end_backward()
        self._wait_all()
        for b in self._buckets:
            self._set_grads(b)

    def finish_manual_step(self) -> None:
        """After :meth:`synchronize_grads` and your own ``optimizer.step()``."""
        self._backward_done = False
        self.steps += 1
        self._release_grads(self._slot)

    def flush(self) -> None:
        """Apply every pending per-layer update now (waits for its communication)."""
        if not self._n_due:
            return
        if self._in_backward:
            raise ExecutorError("flush() during backward")
        for layer, due in enumerate(self._due):
            if due:
                self._update(layer)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside accumulate into ``.grad`` without any collective (module
        docstring, "Gradient accumulation"); the first backward outside communicates the
        sums. Not with a compressor or a parameter server (their state is per step)."""
        if self._in_backward:
            raise ExecutorError("no_sync() entered during backward")
        if self.compressor is not None or self._reducers.get("ps") is not None:
            raise ExecutorError("no_sync(): gradient accumulation is not supported with "
                                "compression or a parameter server")
        previous, self._no_sync = self._no_sync, True
        try:
            yield
        finally:
            self._no_sync = previous

    @contextlib.contextmanager
    def synchronized(self) -> Iterator[nn.Module]:
        """``with executor.synchronized() as model:`` -- weights up to date inside."""
        self.flush()
        yield self.model

    def close(self) -> None:
        """Flush, remove every hook and restore ``model.train``."""
        self.flush()
        for h in self._handles:
            h.remove()
        self._handles = []
        for reducer in self._reducers.values():
            reducer.close()
        self._reducers = {}
        if self._wrapped_train is not None:
            del self.model.train  # the instance attribute; the class method shows again
            self._wrapped_train = None

    # ------------------------------------------------------------------ backward side
    def _reset_stats(self) -> None:
        self.stats = StepStats(bucket_launches=[0] * len(self._buckets),
                               bucket_gathers=[0] * len(self._buckets))

    def _begin_backward(self) -> None:
        if self._backward_done:
            raise ExecutorError("a second backward before step(): gradient accumulation "
                                "over several backward passes is not supported")
        if self._n_due:
            self._stale_watch = {b.params[m] for layer, due in enumerate(self._due) if due
                                 for b, m in self._layers[layer]}
            self.flush()
        elif self._stale_watch:
            self._stale_watch = set()
        for b in self._buckets:
            b.reset()
        self._next = 0
        self._reset_stats()
        self._in_backward = True
        if torch._C._current_graph_task_id() != -1:
            torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)

    def _grad_hook(self, p: torch.Tensor) -> None:
        if self._no_sync:  # accumulate: autograd keeps the sum in .grad; no collective
            if self._n_due:  # an update a skipped forward left: apply it, keeping .grad
                self._flush_keeping_grads()
            return
        grad = p.grad
        # Release .grad first: a per-layer flush below steps the optimizer, which must see
        # no gradient but the ones it is meant to apply.
        p.grad = None
        if not self._in_backward:
            self._begin_backward()
        if self._stale_watch and p in self._stale_watch:
            name = self._buckets[self._slot[p][0]].names[self._slot[p][1]]
            raise ExecutorError(
                f"parameter {name!r} was used in a forward before its per-layer update was "
                "applied (its owning module's forward did not run first); call "
                "executor.flush() before such a forward, or use a plan with update='global'")
        k, m = self._slot[p]  # type: ignore[index]
        b = self._buckets[k]
        if b.seen[m]:
            raise ExecutorError(f"gradient of {b.names[m]!r} arrived twice in one backward "
                                "(several backward passes before step() are not supported)")
        if grad is None:  # pragma: no cover - the hook fires only after accumulation
            return
        torch.div(grad, self.world, out=b.views[m])  # pre-division fused with the copy
        b.seen[m] = True
        b.missing -= 1
        if b.missing == 0:
            self._complete(b)
            self._issue_ready()

    def _flush_keeping_grads(self) -> None:
        """Apply the pending per-layer updates during a ``no_sync`` backward without losing
        a gradient accumulated so far (the update points ``.grad`` at its slice)."""
        params = [b.params[m] for layer, due in enumerate(self._due) if due
                  for b, m in self._layers[layer]]
        kept = [p.grad for p in params]
        self.flush()
        for p, grad in zip(params, kept, strict=True):
            p.grad = grad

    def _complete(self, b: BucketState) -> None:
        if b.with_flags:  # pre-divided like the gradients: the sum is the used fraction
            flags = torch.tensor(b.seen, dtype=b.dtype) / self.world
            b.flat[b.flag_offset:b.flag_offset + len(b.seen)].copy_(flags)
        b.complete = True

    def _issue_ready(self) -> None:
        while self._next < len(self._order):
            k, c = self._order[self._next]
            b = self._buckets[k]
            if not b.complete:
                return
            chunk = b.chunk_views[c]
            nbytes = b.chunk_bytes
            if b.decoupled:
                work = reduce_scatter_into(b.shards[c], chunk, group=self.group, async_op=True)
                kind = RS
            elif k in self._compress_state:
                self._compress_bucket(b)
                work = DONE
                kind = AR
            elif b.spec.algorithm in self._reducers:
                work = self._reducers[b.spec.algorithm].submit(chunk)
                kind = AR
            elif b.spec.algorithm != "default":
                # gradsched's point-to-point implementations are blocking: the bucket is
                # reduced here, in the hook, before backward continues (no overlap).
                blocking_allreduce(b.spec.algorithm)(chunk, self.group)
                work = DONE
                kind = AR
            else:
                work = dist.all_reduce(chunk, group=self.group, async_op=True)
                kind = AR
            b.works.append(work)
            self.stats.collectives[kind] += 1
            self.stats.bytes[kind] += nbytes
            self.stats.bucket_launches[k] += 1
            self.stats.issue_sequence.append((kind, k, c))
            self._next += 1

    def _compress_bucket(self, b: BucketState) -> None:
        """Compress this rank's bucket gradient, reduce it with the compressor's own
        collectives and put the averaged result where the all-reduce would have."""
        grad = b.flat[:b.numel] * self.world  # the hook pre-divided by the world size
        params = torch.cat([p.detach().reshape(-1) for p in b.params])
        out = self.compressor.compress_and_reduce(grad, params, self._compress_state[b.index],
                                                  DistComm(self.group), self.steps)
        b.flat[:b.numel].copy_(out)

    def _end_backward(self) -> None:
        """End of backward (autograd callback): complete buckets with missing gradients,
        issue the rest of the sequence, then the all-gathers."""
        if not self._in_backward:
            return
        for b in self._buckets:
            if not b.complete:
                for m, s in enumerate(b.seen):
                    if not s:
                        b.views[m].zero_()
                        self.stats.unused.append(b.names[m])
                self._complete(b)
        self._issue_ready()
        for k in self._gather_order:
            b = self._buckets[k]
            self._wait(b, b.works, "reduce-scatter")
            for c in range(b.spec.chunks):
                work = all_gather_into(b.chunk_views[c], b.shards[c], group=self.group,
                                   async_op=True)
                b.gather_works.append(work)
                self.stats.collectives[AG] += 1
                self.stats.bytes[AG] += b.chunk_bytes
                self.stats.bucket_gathers[k] += 1
                self.stats.issue_sequence.append((AG, k, c))
        self._in_backward = False
        self._backward_done = True
        if self._stale_watch:
            self._stale_watch = set()

    # ------------------------------------------------------------------ update side
    def _wait(self, b: BucketState, works: list[Any], what: str) -> None:
        """Wait for ``works`` of bucket ``b``: on the CUDA stream for NCCL (see
        :meth:`_set_stream_wait`), else on the host with the executor's timeout."""
        for work in works:
            try:
                ok = work.wait() if b.stream_wait else work.wait(timeout=self.timeout)
            except RuntimeError as exc:
                raise ExecutorError(f"rank {self.rank}: {what} of bucket {b.index} failed or "
                                    f"timed out after {self.timeout.total_seconds():g} s: "
                                    f"{exc}") from exc
            if ok is False:
                raise ExecutorError(f"rank {self.rank}: {what} of bucket {b.index} did not "
                                    f"complete within {self.timeout.total_seconds():g} s")
        works.clear()

    def _arrive(self, b: BucketState) -> None:
        if b.arrived:
            return
        self._wait(b, b.works, "all-reduce")
        self._wait(b, b.gather_works, "all-gather")
        b.read_flags()
        b.arrived = True

    def _wait_all(self) -> None:
        for b in self._buckets:
            self._arrive(b)

    @staticmethod
    def _set_grads(b: BucketState) -> None:
        used = b.used
        for m, p in enumerate(b.params):
            p.grad = b.views[m] if used[m] else None

    @staticmethod
    def _release_grads(params: Any) -> None:
        for p in params:
            p.grad = None

    def _pre_forward(self, module: nn.Module, args: Any) -> None:
        if self._n_due:
            layer = self._module_layer[id(module)]
            if self._due[layer]:
                self._update(layer)

    def _update(self, layer: int) -> None:
        """Per-layer update of ``layer`` with the hyper-parameters recorded at step(),
        through its optimizer view (:mod:`gradsched.runtime.layer_steps`)."""
        members = self._layers[layer]
        for b, m in members:
            if not b.arrived:
                self._arrive(b)
            b.params[m].grad = b.views[m] if b.used[m] else None
        try:
            self._layer_steps.step(layer)  # type: ignore[union-attr]
        finally:
            for b, m in members:
                b.params[m].grad = None
            self._due[layer] = False
            self._n_due -= 1
