"""The re-execution experiment: predict each plan's iteration time, then run it for real.

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
   seed (:func:`round_order`), so that neither a drift of the machine's load nor the item
   before it biases an item. Timing is that of ``gradsched run``
   (:mod:`gradsched.runtime.bench`): the period between starts of consecutive iterations,
   the maximum over ranks. The 1-minute load average is read before every item, and the
   CPU cores used by anything but the ranks during it (``foreign_cpu_cores``,
   :mod:`gradsched.reexec.load`); a case does not start while other work keeps the
   machine busy (``allow_load`` overrides, and the flags say so).
3. **Predicted** (:func:`collect`). The committed trace's compute times are CPU times of
   one uncontended thread (``clock: cpu-thread-time``); the ranks of the real run share the
   machine's cores (with each other and, on a shared machine, with other jobs), so their
   compute runs slower by a factor the trace cannot know. The *compute scale* is therefore
   measured in the same launch: ``median(compute-only control) / (sum of the trace's
   forward, backward and update times)``; every compute time of the trace is multiplied
   by it (the per-layer shape stays the trace's), so a plan without communication would be
   predicted exactly at the control's median. ``predicted_s`` replays each plan on the
   scaled trace, with the executor's issue order (one fixed sequence per iteration, see
   :mod:`gradsched.replay.engine`: what the executor can do on a process group, not the
   dynamic priority scheduling some algorithms assume); ``predicted_interference_s``
   also applies the calibrated interference
   (per-collective compute cost and compute / communication slowdowns,
   :mod:`gradsched.reexec.interference`); ``predicted_raw_s`` is
   the replay of the committed trace as it is (scale 1), for reference.

PyTorch DDP itself (``ddp-native-<cap>``) is predicted with the ``ddp`` planner at the
same cap (DDP's 1 MiB first bucket and its bucket-closing rule). With
``ddp_bucket_cap_mb_list_from: [<planner>]`` every case also runs stock DDP with the
per-bucket ``bucket_cap_mb_list`` that rebuilds that planner's (contiguous) plan
(``ddp-list-<planner>``, :func:`gradsched.planners.ddp_caps.ddp_caps`), interleaved with
the other items; it is predicted by the replay of that plan (the same buckets) and the
buckets DDP rebuilt are recorded in the case's ``meta.json`` (``ddp_rebuilt_buckets``).

This module is the experiment's facade: the configuration is :mod:`gradsched.reexec.config`,
steps 1 and 2 (plans, measurement) :mod:`gradsched.reexec.run`, step 3 (predictions)
:mod:`gradsched.reexec.predict`.
"""

from __future__ import annotations

from gradsched.reexec.config import (
    ALGORITHMS,
    INTERFERENCE_FIELDS,
    NO_INTERFERENCE,
    Case,
    InterferenceSpec,
    Settings,
    interference_for,
    load_config,
    load_interference,
    parse_cases,
    parse_interference_args,
    parse_settings,
    select_cases,
)
from gradsched.reexec.predict import (
    MEASURED_COLUMNS,
    collect,
    collect_case,
    scaled_trace,
    trace_compute_s,
)
from gradsched.reexec.run import (
    CONTROL,
    ITERATION_COLUMNS,
    CasePlans,
    MachineBusyError,
    ddp_label,
    ddp_list_item,
    ddp_list_label,
    executor_key,
    make_case_plans,
    measure_case,
    round_order,
    rounds_task,
    run_case,
)

__all__ = [
    "ALGORITHMS", "CONTROL", "INTERFERENCE_FIELDS", "ITERATION_COLUMNS", "MEASURED_COLUMNS",
    "NO_INTERFERENCE", "Case", "CasePlans", "InterferenceSpec", "MachineBusyError",
    "Settings", "collect", "collect_case", "ddp_label", "ddp_list_item", "ddp_list_label",
    "executor_key", "interference_for",
    "load_config", "load_interference", "make_case_plans", "measure_case",
    "parse_cases", "parse_interference_args", "parse_settings", "round_order", "rounds_task",
    "run_case", "scaled_trace", "select_cases", "trace_compute_s",
]
