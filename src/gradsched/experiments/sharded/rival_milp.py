"""PyTorch's FSDP-unit MILP as a rival to the sharded optimum: a reconstruction, written
here, of the formulation of ``fsdp_milp`` (``torch/distributed/_tools/fsdp_ilp.py``, pytorch
commit 79f1d16a219089d0b311f1706e17ddb5776385c0, L41-290; it pairs with
``ilp_utils.py``'s module graph).

**Where it stands.** ``fsdp_ilp.py`` is not in any released torch: it was merged into
pytorch's main branch in October 2024 and reverted three weeks later, and the
re-submission was closed; the installed torch 2.14.1 has ``ilp_utils.py`` and
``sac_ilp.py`` but no ``fsdp_ilp.py``. Its code does not carry over; its formulation does,
and is solved here with PuLP's CBC, as the original does (PuLP, which Snakemake already
pins in ``requirements.lock``).

**The formulation** (times in milliseconds, memory in GiB, as the original). Nodes are the
modules of the model in forward pre-order, node 0 the root; ``x_i`` binary, node ``i`` is an
FSDP unit; ``x_0 = 1``; no unit inside another (``x_i + x_j <= 1`` for an ancestor ``i`` of
``j``). A unit's parameters ``p_i = P_i x_i`` and gradients ``g_i = G_i x_i``, the root the
rest. Memory at module ``i``: ``m_i = (P + TG_i) / W + sum over i's ancestors and itself of
(p_j + g_j) + a_i``; ``max_m >= m_i``, ``max_p >= p_i``, and ``max_m + 2 max_p <= budget``
(``2 max_p``: the original's allowance for a prefetched unit). Collective times are
alpha-beta: ``ag_i = latency + p_i / bandwidth``, ``rs_i`` the same of ``g_i``. The next
unit's all-gather is prefetched by the unit before it in forward (``fw_ag_i``), and in
backward order (``bw_ag_i``); the reduce-scatter of the unit after it in forward order
follows in backward (``bw_rs_i``). Exposed time: ``max(0, fw_ag_i - FCP_i)`` in forward
and ``max(0, bw_ag_i + bw_rs_i - BCP_i)`` in backward for each unit, ``FCP_i``/``BCP_i``
the module's forward/backward compute; backward order is the reverse of forward
post-order (the original's ``reversed(fw_post_order)``); the objective is their sum plus the root's
all-gather and reduce-scatter and the first prefetches (``ag_0 + rs_0 + fw_ag_0 +
bw_rs_0``). The products of binaries and times are linearised with a big ``M`` as there.
Solved with CBC at the original's relative gap (5 %); in place of its 180 s time limit a
node limit (:data:`MAX_NODES`), so that the answer does not depend on the machine's load.

**Inputs from gradsched's data** (the same the sharded optimum sees; the original reads
them from its memory tracker and runtime estimator on the real module):

* the module tree from the trace's tensor names (dotted prefixes); a module's ``P_i`` and
  ``G_i`` the bytes of its tensors (gradients the parameters' dtype); ``TG_i`` every
  gradient (the largest its tracker could see); ``FCP_i``/``BCP_i`` the forward and
  backward seconds of the trace's layers all of whose tensors are under the module; a
  module whose layers are not contiguous in the trace's forward order cannot be a unit;
* activations ``a_i = 0``: the trace has none, and the optimum's memory cap does not count
  them either;
* ``latency`` and ``bandwidth`` per collective: the least-squares alpha-beta line through
  the comm model's times at every module's size, at the world size;
* the budget: the optimum's cap on gathered parameters and unsharded gradients plus the
  parameter and gradient shards (``2 P / W``), which the formulation counts and the cap
  does not; ``big M``: the original's 1000 ms, or ten times every compute and collective
  millisecond summed where that is larger (CPU traces run longer than a second).

**Its plan**: every chosen module a unit (resharded after forward, FSDP2's default),
forward and backward prefetch one unit deep (what the formulation assumes), the root the
rest; replayed by :mod:`gradsched.replay.sharded` beside the optimum.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pulp

from gradsched.costmodel.base import CommModel, comm_times
from gradsched.errors import ConfigError
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq

RIVAL = "fsdp-milp"
"""The rival plan's algorithm name."""
GIB = 2**30
MS = 1e3
ORIGINAL_BIG_M = 1000.0
GAP_REL, MAX_NODES, TIME_LIMIT_S = 0.05, 2000, 900
"""CBC's stops: the original's relative gap; in place of its 180 s time limit a limit on
branch-and-bound nodes, so that the answer does not depend on the machine's speed or load
(outputs are deterministic), with a wall-clock guard far above it."""


@dataclass(frozen=True)
class Module:
    """One node of the module tree: its name, its tensors, their layers' span and times."""

    fqn: str
    tensors: tuple[str, ...]
    nbytes: float
    first: int
    last: int
    forward_s: float
    backward_s: float
    contiguous: bool


@dataclass(frozen=True)
class MilpResult:
    """The MILP's answer: the plan, its own objective and peak bound, the solver's status
    and the alpha-beta lines it used."""

    plan: ShardedPlan
    status: str
    exposed_comm_s: float
    peak_bytes: float
    latency_s: dict[str, float]
    s_per_byte: dict[str, float]


class NoMilpSolution(ConfigError):
    """The MILP found no layout within its budget (by its own memory model); ``status``
    is the solver's word."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


def module_tree(trace: ComputeTrace, seq: LayerSeq) -> list[Module]:
    """The modules of the trace (``seq``: its layers, :class:`ShardedProblem`'s) in forward
    pre-order (by first layer, outer first); index 0 is the model itself (module
    docstring)."""
    layer_of = {t: j for j, group in enumerate(seq.tensors) for t in group}
    size = dict(zip(trace.frame["name"], trace.frame["bytes"].astype(float), strict=True))
    members: dict[str, list[str]] = {}
    for name in seq.names:
        parts = name.split(".")
        for depth in range(len(parts)):
            members.setdefault(".".join(parts[:depth]), []).append(name)
    out = []
    for fqn, tensors in members.items():
        layers = sorted({layer_of[t] for t in tensors})
        whole = [j for j in layers if all(t in set(tensors) for t in seq.tensors[j])]
        out.append(Module(fqn, tuple(tensors), float(sum(size[t] for t in tensors)),
                          layers[0], layers[-1], float(seq.forward_s[whole].sum()),
                          float(seq.backward_s[whole].sum()),
                          whole == list(range(layers[0], layers[-1] + 1))))
    out.sort(key=lambda m: (m.first, -m.last, m.fqn.count(".") if m.fqn else -1))
    root = next(i for i, m in enumerate(out) if m.fqn == "")
    return [out[root], *(m for i, m in enumerate(out) if i != root)]


def _depth(fqn: str) -> int:
    return 0 if fqn == "" else fqn.count(".") + 1


def _ancestor(a: str, b: str) -> bool:
    """``a`` is ``b`` or a module above it."""
    return a == "" or a == b or b.startswith(f"{a}.")


def alpha_beta(model: CommModel, collective: str, sizes: np.ndarray, world: int
               ) -> tuple[float, float]:
    """(latency s, s per byte): least squares through the model's times at ``sizes``."""
    times = comm_times(model, collective, sizes, world)
    if len(np.unique(sizes)) < 2:
        return max(float(times[0]), 0.0), 0.0
    slope, intercept = np.polyfit(sizes, times, 1)
    return max(float(intercept), 0.0), max(float(slope), 0.0)


def fsdp_milp(problem: ShardedProblem) -> MilpResult:
    """Solve the reconstructed formulation (module docstring) for the problem's trace, comm
    model, world size and cap on gathered parameters and unsharded gradients (None: no cap,
    a budget of ten times every byte)."""
    trace, model, world_size = problem.trace, problem.model, problem.world_size
    memory_cap_bytes = problem.memory_cap_bytes
    mods = module_tree(trace, problem.seq)
    n, world = len(mods), max(world_size, 1)
    total = mods[0].nbytes
    shards = 2.0 * total / world
    budget = (memory_cap_bytes if memory_cap_bytes is not None else 10.0 * total) + shards
    sizes = np.array([m.nbytes for m in mods])
    lines = {c: alpha_beta(model, c, sizes, world_size) for c in ("all_gather",
                                                                   "reduce_scatter")}
    lat = {c: v[0] * MS for c, v in lines.items()}
    ms_per_gib = {c: v[1] * GIB * MS for c, v in lines.items()}
    big_m = max(ORIGINAL_BIG_M, 10.0 * MS * (
        sum(m.forward_s + m.backward_s for m in mods)
        + float(comm_times(model, "all_gather", sizes, world_size).sum())
        + float(comm_times(model, "reduce_scatter", sizes, world_size).sum())))

    prob = pulp.LpProblem("fsdp_units", pulp.LpMinimize)
    idx = range(n)

    def var(name: str, cat: str = "Continuous") -> list[pulp.LpVariable]:
        return [prob.add_variable(f"{name}_{i}", 0, 1 if cat == "Binary" else None, cat)
                for i in idx]

    x = var("x", "Binary")
    p, g, m, ag, rs = var("p"), var("g"), var("m"), var("ag"), var("rs")
    t0, fw_ag, t1, bw_ag, t2, bw_rs = var("t0"), var("fwag"), var("t1"), var("bwag"), \
        var("t2"), var("bwrs")
    t3, fw_e, t4, bw_e = var("t3"), var("fwe"), var("t4"), var("bwe")
    max_m, max_p = prob.add_variable("max_m", 0), prob.add_variable("max_p", 0)

    prob += x[0] == 1
    for i in range(1, n):
        if not mods[i].contiguous:
            prob += x[i] == 0
        for j in range(i + 1, n):
            if _ancestor(mods[i].fqn, mods[j].fqn):
                prob += x[i] + x[j] <= 1
        prob += p[i] == mods[i].nbytes / GIB * x[i]
        prob += g[i] == mods[i].nbytes / GIB * x[i]
    prob += p[0] == total / GIB - pulp.lpSum(p[1:])
    prob += g[0] == total / GIB - pulp.lpSum(g[1:])
    for i in idx:
        above = [j for j in idx if _ancestor(mods[j].fqn, mods[i].fqn)]
        prob += m[i] == 2.0 * total / world / GIB + pulp.lpSum(p[j] + g[j] for j in above)
        prob += max_m >= m[i]
        prob += max_p >= p[i]
        prob += ag[i] == lat["all_gather"] + ms_per_gib["all_gather"] * p[i]
        prob += rs[i] == lat["reduce_scatter"] + ms_per_gib["reduce_scatter"] * g[i]
    prob += max_m + 2 * max_p <= budget / GIB
    _next_unit(prob, list(idx), x, ag, t0, fw_ag, big_m)  # forward prefetch
    backward = sorted(idx, key=lambda i: (-mods[i].last, _depth(mods[i].fqn)))
    _next_unit(prob, backward, x, ag, t1, bw_ag, big_m)  # backward prefetch
    _next_unit(prob, list(idx), x, rs, t2, bw_rs, big_m)  # the next unit's reduce-scatter
    for i in range(1, n):
        prob += t3[i] >= fw_ag[i] - mods[i].forward_s * MS
        prob += t4[i] >= bw_ag[i] + bw_rs[i] - mods[i].backward_s * MS
        for t, e in ((t3, fw_e), (t4, bw_e)):
            prob += e[i] <= big_m * x[i]
            prob += e[i] <= t[i]
            prob += e[i] >= t[i] - big_m * (1 - x[i])
    prob += fw_e[0] == 0
    prob += bw_e[0] == 0
    prob += pulp.lpSum(fw_e[1:]) + pulp.lpSum(bw_e[1:]) + ag[0] + rs[0] + fw_ag[0] + bw_rs[0]
    with warnings.catch_warnings():  # PuLP 3.3 warns that its bundled CBC goes in PuLP 4
        warnings.simplefilter("ignore", DeprecationWarning)
        prob.solve(pulp.PULP_CBC_CMD(gapRel=GAP_REL, maxNodes=MAX_NODES,
                                     timeLimit=TIME_LIMIT_S, msg=False, threads=1))
    # 1: optimal within the gap; 2: a solution, a limit (nodes) reached first
    status = {1: "optimal within 5 % gap", 2: "feasible at node limit"}.get(prob.sol_status,
                                                                             "")
    if not status:
        status = pulp.LpSolution.get(prob.sol_status, str(prob.sol_status))
        raise NoMilpSolution(f"the FSDP-unit MILP found no solution ({status}) under a "
                             f"budget of {budget:.4g} bytes (the cap plus the shards)", status)
    chosen = [mods[i] for i in range(1, n) if round(x[i].value() or 0) == 1]
    units = tuple(Unit(m.tensors) for m in sorted(chosen, key=lambda m: m.first))
    plan = ShardedPlan(RIVAL, units or (Unit(mods[0].tensors),), forward_prefetch=1,
                       backward_prefetch=1,
                       info={"source": "reconstruction of torch fsdp_ilp.fsdp_milp "
                                       "(pytorch 79f1d16, never released)",
                             "status": status})
    return MilpResult(plan, status, float(pulp.value(prob.objective)) / MS,
                      float((max_m.value() + 2 * max_p.value()) * GIB),
                      {c: v[0] for c, v in lines.items()}, {c: v[1] for c, v in lines.items()})


def _next_unit(prob, order: list[int], x, t, helper, out, big_m: float) -> None:
    """``helper[i]``: ``t`` of the first unit at or after ``i`` in ``order``;
    ``out[i] = x_i * helper[next(i)]`` (``out`` of the last node 0), linearised."""
    last = order[-1]
    prob += helper[last] == t[last]
    for k in range(1, len(order) - 1):
        i, after = order[k], order[k + 1]
        prob += helper[i] <= helper[after] + big_m * x[i]
        prob += helper[i] >= helper[after] - big_m * x[i]
        prob += helper[i] <= t[i] + big_m * (1 - x[i])
        prob += helper[i] >= t[i] - big_m * (1 - x[i])
    prob += out[last] == 0
    for k in range(len(order) - 1):
        i, after = order[k], order[k + 1]
        prob += out[i] <= big_m * x[i]
        prob += out[i] <= helper[after]
        prob += out[i] >= helper[after] - big_m * (1 - x[i])
