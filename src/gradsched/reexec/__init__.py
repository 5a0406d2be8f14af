"""Re-execution experiment: replay predictions vs real runs of the same plans (predict
each plan's iteration time, then run it for real).

For every *case* (model x batch size x world size x network):

1. **Plans.** Every configured planner (``wfbp``, ``syncsgd``, ``ddp``, ..., ``best``)
   makes its plan from the committed compute trace and the matching committed gloo sweep
   (``traces/comm/cpu/gloo-<network>-p<P>.csv``). Plans that the executor would run
   identically (same buckets, tensors, collectives, chunks, priorities and update mode;
   the executor ignores ``release_s``, ``channels`` and per-bucket ``algorithm``) share
   one measurement; the CSV keeps one row per algorithm and says which plan it ran.
2. **Measured.** One launch per case runs, on every rank, ``rounds`` rounds; each round
   runs every *item* (each distinct plan through :class:`~gradsched.runtime.PlanExecutor`,
   PyTorch DDP itself at each configured ``bucket_cap_mb``, and a *compute-only control*:
   forward, backward and SGD step with no communication at all) for ``warmup`` untimed
   and ``iters`` timed iterations, in a random order drawn anew for every round from the
   seed (:func:`gradsched.run_order.round_order`), so that neither a drift of the
   machine's load nor the item before it biases an item. This is the project's one timing
   protocol (:mod:`gradsched.runtime.rounds`, also behind ``gradsched run``, ``advise
   --validate`` and the sharded re-execution): the period between starts of consecutive
   iterations, the maximum over ranks. The 1-minute load average is read before every
   item, and the CPU cores used by anything but the ranks during it
   (``foreign_cpu_cores``, :mod:`gradsched.runtime.load`); a case does not start while
   other work keeps the machine busy (``allow_load`` overrides, and the flags say so).
3. **Predicted** (:func:`gradsched.reexec.predict.collect`). The committed trace's compute
   times are CPU times of one uncontended thread (``clock: cpu-thread-time``); the ranks of
   the real run share the machine's cores (with each other and, on a shared machine, with
   other jobs), so their compute runs slower by a factor the trace cannot know. The *compute
   scale* is therefore measured in the same launch: ``median(compute-only control) / (sum of
   the trace's forward, backward and update times)``; every compute time of the trace is
   multiplied by it (the per-layer shape stays the trace's), so a plan without communication
   would be predicted exactly at the control's median. ``predicted_s`` replays each plan on
   the scaled trace, with the executor's issue order (one fixed sequence per iteration, see
   :mod:`gradsched.replay.engine`: what the executor can do on a process group, not the
   dynamic priority scheduling some algorithms assume); ``predicted_interference_s`` also
   applies the calibrated interference (per-collective compute cost and compute /
   communication slowdowns, calibrated by :mod:`gradsched.capture.interference`);
   ``predicted_raw_s`` is the replay of the committed trace as it is (scale 1), for
   reference.

PyTorch DDP itself (``ddp-native-<cap>``) is predicted with the ``ddp`` planner at the
same cap (DDP's 1 MiB first bucket and its bucket-closing rule). With
``ddp_bucket_cap_mb_list_from: [<planner>]`` every case also runs stock DDP with the
per-bucket ``bucket_cap_mb_list`` that rebuilds that planner's (contiguous) plan
(``ddp-list-<planner>``, :func:`gradsched.planners.ddp_caps.ddp_caps`), interleaved with
the other items; it is predicted by the replay of that plan (the same buckets) and the
buckets DDP rebuilt are recorded in the case's ``meta.json`` (``ddp_rebuilt_buckets``).

Modules:

* :mod:`~gradsched.reexec.config` -- cases, settings, interference JSON;
* :mod:`~gradsched.reexec.run` -- steps 1 and 2 (plans, measurement);
* :mod:`~gradsched.reexec.predict` -- step 3 (predictions next to the measurements);
* :mod:`~gradsched.reexec.uncertainty` -- the one bootstrap (within rounds) of every
  interval; :mod:`~gradsched.reexec.stock_ddp` -- stock DDP with a planner's buckets;
  :mod:`~gradsched.reexec.analysis` -- per-plan errors, median |error|, worst, Kendall tau;
* :mod:`~gradsched.reexec.sharded` -- the same protocol for FSDP2 plans;
* :mod:`~gradsched.reexec.validate` -- ``gradsched advise --validate``: the advice measured
  the same way.
"""

from __future__ import annotations

__all__ = ["analysis", "config", "predict", "run", "sharded", "stock_ddp",
           "uncertainty", "validate"]
