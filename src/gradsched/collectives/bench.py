"""Launcher tasks and drivers: exactness check and timing sweep of the collective algorithms.

Tasks (run on every rank by :func:`gradsched.distributed.launch.launch`):

* :func:`check_task` -- every algorithm x size x dtype x input kind against the exact
  (float64) sum of the inputs, against ``dist.all_reduce`` / ``dist.broadcast``, and
  across ranks (bit-identical results); returns the failures and the measured errors.
* :func:`bench_task` -- the timing sweep: sizes outer, algorithms inner (so drifting load
  on a shared machine hits every algorithm alike); per point, the timer of
  ``gradsched capture comm`` (:func:`gradsched.capture.timers.time_calls`: up to
  ``warmup`` warm-up calls, then ``n = clamp(target_s / t_warm, min_iters, max_iters)``
  timed calls, each after a barrier); a call's time is the slowest rank's
  (:func:`gradsched.capture.timers.slowest_per_call`); the reported ``time_s`` is the
  median over calls (``time_min_s``/``time_max_s`` the extremes). The median of single
  calls resists the scheduling spikes of a shared machine better than a mean over
  back-to-back calls.

Error bound used by the checks (Higham, "Accuracy and stability of numerical
algorithms", Sec. 4.2): any order of summing ``P`` terms in a floating-point format with
unit roundoff ``u`` satisfies ``|s_hat - s| <= gamma_{P-1} * sum_i |x_i|`` with
``gamma_n = n u / (1 - n u)``; ``u = 2**-24`` (fp32), ``2**-8`` (bf16). The result of an
algorithm must be within that bound of the exact sum and within twice the bound of the
library's result (whose order differs). Integer-valued inputs whose partial sums are
exactly representable (|values| <= 8 here) must be bit-exact.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from gradsched.admission import check_memory, check_points, check_ranks
from gradsched.capture.timers import CallCounts, agree_max, slowest_per_call, time_calls
from gradsched.collectives import algorithms, get, registry
from gradsched.distributed.cluster import EmulatedCluster
from gradsched.distributed.launch import LaunchSpec, launch
from gradsched.distributed.shaping import line_rate_meta, parse_rate
from gradsched.errors import ConfigError
from gradsched.provenance import comm_software_versions, hardware_summary, load_average
from gradsched.traces import CommTrace

U_ROUNDOFF = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -8, "float64": 2.0 ** -53}


def gamma(n: int, dtype_name: str) -> float:
    """Higham's gamma_n = n u / (1 - n u) for the dtype's unit roundoff."""
    nu = n * U_ROUNDOFF[dtype_name]
    return nu / (1.0 - nu)


CHECK_SIZES = (1, 2, 3, 5, 7, 8, 13, 31, 97, 1000, 4099)
MAX_CHECK_CHUNKS = 64  # LP variants with a fixed chunk run only up to this many chunks


def _inputs(seed: int, rank: int, n: int, dtype: Any, kind: str) -> Any:
    import torch

    gen = torch.Generator().manual_seed(seed * 1_000_003 + rank * 7919 + n)
    if kind == "int":
        return torch.randint(-8, 9, (n,), generator=gen).to(dtype)
    return torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)


def _digest(t: Any) -> str:
    import torch

    raw = t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32)
    return hashlib.sha1(raw.numpy().tobytes()).hexdigest()[:16]


def _family(label: str) -> str:
    """``all_reduce/lp[b=4]/...`` -> ``all_reduce/lp``."""
    return "/".join(label.split("/")[:2]).split("[")[0]


@dataclass
class _Checks:
    """The running results of :func:`check_task` on one rank of a group of ``p``."""

    p: int
    failures: list[str] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    worst: dict[str, float] = field(default_factory=dict)  # case family -> max error / bound
    n_checks: int = 0

    def note(self, key: str, value: float) -> None:
        self.worst[key] = max(self.worst.get(key, 0.0), value)

    def compare(self, label: str, got: Any, xs: list[Any], ref: Any, dname: str, kind: str,
                exact_only: bool = False) -> None:
        """``got`` against the exact sum of ``xs`` and against the library's ``ref``."""
        import torch

        self.n_checks += 1
        if got.numel() == 0:
            return
        exact = torch.stack([x.double() for x in xs]).sum(0)
        if exact_only or kind == "int":
            want = exact.to(got.dtype)
            if not torch.equal(got, want):
                self.failures.append(f"{label}: not bit-exact (max |err| "
                                     f"{(got.double() - exact).abs().max().item():.3g})")
            if ref is not None and not torch.equal(got, ref):
                self.failures.append(f"{label}: differs from the library result")
            return
        scale = torch.stack([x.double().abs() for x in xs]).sum(0)
        bound = gamma(self.p - 1, dname) * scale + 1e-300
        err = (got.double() - exact).abs() / bound
        self.note(f"{_family(label)}|{dname}|vs_exact", float(err.max()))
        if float(err.max()) > 1.0:
            self.failures.append(f"{label}: error {float(err.max()):.3g} x the bound "
                                 f"gamma_(P-1) sum|x|")
        if ref is not None:
            err_ref = (got.double() - ref.double()).abs() / bound
            self.note(f"{_family(label)}|{dname}|vs_library", float(err_ref.max()))
            if float(err_ref.max()) > 2.0:
                self.failures.append(f"{label}: differs from the library result by "
                                     f"{float(err_ref.max()):.3g} x the bound")


@dataclass
class _Case:
    """One dtype x input kind x size: every rank's inputs, this rank's and the library's
    all-reduce of them."""

    dname: str
    kind: str
    n: int
    esize: int
    xs: list[Any]
    mine: Any
    ref: Any

    @property
    def label(self) -> str:
        return f"{self.dname}/{self.kind}/n={self.n}"


def _case(seed: int, rank: int, p: int, dname: str, dtype: Any, kind: str, n: int) -> _Case:
    import torch
    import torch.distributed as dist

    esize = torch.tensor([], dtype=dtype).element_size()
    xs = [_inputs(seed, r, n, dtype, kind) for r in range(p)]
    mine = xs[rank]
    ref = mine.clone()
    dist.all_reduce(ref)
    return _Case(dname, kind, n, esize, xs, mine, ref)


def _all_reduce_variants(reg: dict[str, dict[str, Any]], case: _Case) -> list[tuple[str, Any]]:
    """The registered all-reduces and LP with a few fixed chunk sizes."""
    from gradsched.collectives import lp  # imports torch

    variants: list[tuple[str, Any]] = [
        (name, fn) for name, fn in reg["all_reduce"].items() if name != "default"]
    for cb in (case.esize, 3 * case.esize, 1000):
        if case.n * case.esize > MAX_CHECK_CHUNKS * cb:
            continue  # many tiny messages: slow, and nothing new to check
        variants.append((f"lp[b={cb}]", lambda t, g=None, cb=cb:
                         lp.all_reduce(t, g, chunk_bytes=cb)))
    return variants


def _check_all_reduce(checks: _Checks, reg: dict[str, dict[str, Any]], case: _Case) -> None:
    for name, fn in _all_reduce_variants(reg, case):
        got = case.mine.clone()
        fn(got, None)
        label = f"all_reduce/{name}/{case.label}"
        checks.compare(label, got, case.xs, case.ref, case.dname, case.kind)
        checks.digests[label] = _digest(got)


def _check_rooted(checks: _Checks, reg: dict[str, dict[str, Any]], case: _Case, rank: int,
                  roots: list[int]) -> None:
    """Broadcast and reduce (LP, MST) from each root."""
    import torch

    for root in roots:
        for name in ("lp", "mst"):
            for cb in ((None, 3 * case.esize) if name == "lp" else (None,)):
                kw = {} if cb is None else {"chunk_bytes": cb}
                got = case.mine.clone()
                reg["broadcast"][name](got, root, None, **kw)
                label = f"broadcast/{name}[b={cb}]/root={root}/{case.label}"
                checks.n_checks += 1
                if not torch.equal(got, case.xs[root]):
                    checks.failures.append(f"{label}: not equal to the root's input")
                got = case.mine.clone()
                reg["reduce"][name](got, root, None, **kw)
                if rank == root:
                    checks.compare(f"reduce/{name}[b={cb}]/root={root}/{case.label}", got,
                                   case.xs, case.ref, case.dname, case.kind)


def _check_blocks(checks: _Checks, case: _Case, rank: int, p: int) -> None:
    """Ring reduce-scatter and all-gather on the blocks of :func:`block_bounds`."""
    import torch

    from gradsched.collectives import ring  # imports torch
    from gradsched.collectives.common import block_bounds  # imports torch

    xs, mine = case.xs, case.mine
    bounds = block_bounds(case.n, p)
    a, b = bounds[rank]
    got = mine.clone()
    ring.reduce_scatter(got, None)
    checks.compare(f"reduce_scatter/ring/{case.label}", got[a:b], [x[a:b] for x in xs],
                   case.ref[a:b], case.dname, case.kind)
    got = torch.zeros_like(mine)
    got[a:b] = mine[a:b]
    ring.all_gather(got, None)
    want = torch.cat([xs[r][lo:hi] for r, (lo, hi) in enumerate(bounds)])
    checks.n_checks += 1
    if not torch.equal(got, want):
        checks.failures.append(f"all_gather/ring/{case.label}: not equal to the blocks")


def check_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Exactness of every implementation on this group (see the module docstring)."""
    import torch

    reg = registry()
    p = world_size
    seed = int(payload.get("seed", 1))
    sizes = [int(s) for s in payload.get("sizes", CHECK_SIZES)]
    sizes = sorted(set(sizes) | {max(1, p - 1), p, p + 1})
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    checks = _Checks(p)
    int_sizes = [int(s) for s in payload.get("int_sizes", sizes)]
    cases = [(dname, kind, n) for dname in dtypes for kind in ("rand", "int")
             for n in (sizes if kind == "rand" else int_sizes)]
    for index, (dname, kind, n) in enumerate(cases):
        case = _case(seed, rank, p, dname, dtypes[dname], kind, n)
        _check_all_reduce(checks, reg, case)
        # Roots alternate between 0 and P-1 from case to case (halves the calls).
        roots = ([index % 2 * (p - 1)] if payload.get("alternate_roots", True)
                 else sorted({0, p - 1}))
        _check_rooted(checks, reg, case, rank, roots)
        _check_blocks(checks, case, rank, p)
    return {"rank": rank, "failures": checks.failures[:50],
            "n_failures": len(checks.failures), "n_checks": checks.n_checks,
            "digests": checks.digests, "worst": checks.worst}


# ----------------------------------------------------------------------------- timing


def size_grid(min_bytes: int, max_bytes: int, per_octave: int = 1) -> list[int]:
    """Message sizes from ``min_bytes`` to ``max_bytes``: powers of two (``per_octave``
    points per doubling), multiples of 4 bytes (fp32 elements), both ends included."""
    if min_bytes < 4 or max_bytes < min_bytes:
        raise ConfigError(f"need 4 <= --min-bytes <= --max-bytes, got {min_bytes} and "
                          f"{max_bytes}")
    out: set[int] = set()
    lo, hi = math.log2(min_bytes), math.log2(max_bytes)
    steps = max(1, round((hi - lo) * per_octave))
    for i in range(steps + 1):
        value = 2.0 ** (lo + (hi - lo) * i / steps)
        out.add(max(4, round(value / 4) * 4))
    return sorted(out)


def _algorithm_fns(collective: str, names: list[str], chunk: Any, link: Any
                   ) -> dict[str, Callable[[Any], None]]:
    """Each algorithm as a call on one tensor (LP with the chunk size and link given)."""
    fns = {}
    for name in names:
        fn = get(collective, name)
        if name == "lp":
            def fn(t: Any, _f: Any = fn) -> None:
                _call(collective, _f, t, chunk_bytes=chunk, link=link)
        else:
            def fn(t: Any, _f: Any = fn) -> None:
                _call(collective, _f, t)
        fns[name] = fn
    return fns


def bench_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Timing sweep of ``payload['algorithms']`` for one collective (see module docstring).

    Payload: collective, algorithms, sizes (bytes, fp32 elements), min_iters/max_iters
    (timed calls per point), target_s (time budget of a point's timed calls), warmup
    (warm-up calls per point in all), lp_chunk_bytes (None = optimal for lp_link), lp_link
    ([alpha, beta, gamma]).
    """
    import torch

    from gradsched.collectives import lp  # imports torch

    collective = payload["collective"]
    names = list(payload["algorithms"])
    sizes = [int(s) for s in payload["sizes"]]
    counts = CallCounts(int(payload.get("warmup", BenchConfig.warmup)),
                        int(payload.get("min_iters", 5)), int(payload.get("max_iters", 30)),
                        float(payload.get("target_s", 0.1)))
    agree = agree_max("cpu")
    link = lp.LinkParams(*payload.get("lp_link", (lp.DEFAULT_LINK.alpha_s,
                                                  lp.DEFAULT_LINK.beta_s_per_byte,
                                                  lp.DEFAULT_LINK.gamma_s_per_byte)))
    chunk = payload.get("lp_chunk_bytes")
    fns = _algorithm_fns(collective, names, chunk, link)
    rows = []
    for nbytes in sizes:
        x = torch.zeros(nbytes // 4, dtype=torch.float32)
        for name in names:
            point = time_calls(lambda f=fns[name], x=x: f(x), counts, agree)
            samples = slowest_per_call(point.times_s)
            row = {"algorithm": name, "bytes": nbytes, "time_s": statistics.median(samples),
                   "time_min_s": min(samples), "time_max_s": max(samples),
                   "iters": len(samples), "warmup": point.warmup}
            if name == "lp":
                row["lp_chunk_bytes"] = 4 * lp.chunk_elements(
                    nbytes // 4, 4, collective, world_size, chunk, link)
            rows.append(row)
    return {"rank": rank, "rows": rows if rank == 0 else [],
            "gamma_s_per_byte": measure_gamma() if rank == 0 else None}


def measure_gamma(nbytes: int = 1 << 22, reps: int = 11) -> float:
    """The reduction cost gamma (s/byte): median time of ``x.add_(y)`` on fp32 tensors of
    ``nbytes`` bytes, per byte of the vector (what the formulas' ``M gamma`` means)."""
    import torch

    x = torch.zeros(nbytes // 4)
    y = torch.ones(nbytes // 4)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        x.add_(y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / nbytes


def _call(collective: str, fn: Any, tensor: Any, **kw: Any) -> None:
    if collective in ("broadcast", "reduce"):
        fn(tensor, 0, None, **kw)
    else:
        fn(tensor, None, **kw)


# ----------------------------------------------------------------------------- driver

BENCH_TASK = "gradsched.collectives.bench:bench_task"
SHARED_MACHINE_NOTE = (
    "Measured on a 2-core machine shared with other concurrent jobs (load average in "
    "'load_average'): absolute times include scheduling noise; algorithms were interleaved "
    "size by size so that the noise hits all of them alike, and each point is the median "
    "of several single calls.")


BUFFERS_PER_RANK = 4
"""Message-sized buffers one rank of the benchmark holds at once (the tensor, the
algorithms' receive and chunk buffers, the checked result)."""


@dataclass
class BenchConfig:
    """One ``gradsched bench collectives`` run (every world size in ``world_sizes``)."""

    collective: str = "all_reduce"
    algorithms: tuple[str, ...] = ("default", "lp", "ring", "mst", "rd", "rhd")
    world_sizes: tuple[int, ...] = (2,)
    min_bytes: int = 4
    max_bytes: int = 1 << 24
    per_octave: int = 1
    min_iters: int = 5
    max_iters: int = 30
    target_s: float = 0.1
    warmup: int = 2
    """Warm-up calls per point in all, as ``capture comm --warmup`` (fewer when they would
    take more than a quarter of ``target_s``): the first sets the counts, the last
    re-estimates a call's time."""
    lp_chunk_bytes: float | None = None
    lp_link: tuple[float, float, float] | None = None
    cluster_rate: str | None = None
    backend: str = "gloo"
    op_timeout_s: float = 300.0
    deadline_s: float = 1800.0
    note: str = SHARED_MACHINE_NOTE
    oversubscribe: bool = False

    def validate(self) -> None:
        names = algorithms(self.collective)
        bad = [a for a in self.algorithms if a not in names]
        if bad:
            raise ConfigError(f"--algorithms: {', '.join(bad)} not implemented for "
                              f"{self.collective}; known: {', '.join(names)}")
        if not self.algorithms:
            raise ConfigError("--algorithms: give at least one algorithm")
        repeated = sorted({a for a in self.algorithms if list(self.algorithms).count(a) > 1})
        if repeated:  # found only after the whole sweep, as a duplicate measurement key
            raise ConfigError(f"--algorithms: {repeated[0]!r} is named twice; each runs once")
        if len(set(self.world_sizes)) != len(self.world_sizes):
            raise ConfigError("--world-size: a world size is named twice")
        if any(p < 2 for p in self.world_sizes):
            raise ConfigError("--world-size: every world size must be >= 2")
        if not 1 <= self.min_iters <= self.max_iters:
            raise ConfigError("need 1 <= --min-iters <= --max-iters")
        sizes = size_grid(self.min_bytes, self.max_bytes, self.per_octave)
        check_points("bench collectives",
                     len(sizes) * len(self.algorithms) * len(self.world_sizes),
                     proceed="narrow the sizes, lower --per-octave or give fewer algorithms "
                             "or world sizes")

    def admit(self) -> None:
        """Refuse, before any rank starts, the largest world size when this machine cannot
        run its ranks, or its buffers (:data:`BUFFERS_PER_RANK` x the largest message per
        rank) beyond the available memory."""
        ranks = max(self.world_sizes)
        check_ranks("bench collectives", ranks, oversubscribe=self.oversubscribe)
        if self.backend == "nccl":  # the buffers are in device memory
            return
        check_memory("bench collectives", BUFFERS_PER_RANK * self.max_bytes, ranks,
                     detail=f"{BUFFERS_PER_RANK} x the largest message, {self.max_bytes} "
                            "bytes, per rank",
                     proceed="lower --max-bytes or the world sizes")


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor."""
    p = world_size
    if collective == "all_reduce":
        return 2.0 * (p - 1) / p
    if collective in ("all_gather", "reduce_scatter"):
        return (p - 1) / p
    return 1.0


def _lp_link(config: BenchConfig) -> tuple[float, float, float]:
    """LP's link parameters: the configured ones, else the defaults with the shaped link's
    beta (8 / rate seconds per byte) on an emulated cluster."""
    from gradsched.collectives import lp  # imports torch

    link = config.lp_link or (lp.DEFAULT_LINK.alpha_s, lp.DEFAULT_LINK.beta_s_per_byte,
                              lp.DEFAULT_LINK.gamma_s_per_byte)
    if config.lp_link is None and config.cluster_rate is not None:
        # The shaped link sets beta: 8 / rate seconds per byte.
        link = (link[0], 8.0 / parse_rate(config.cluster_rate), link[2])
    return link


def _launch_at(p: int, config: BenchConfig, payload: dict[str, Any]
               ) -> tuple[list[dict[str, Any]], str, str, int]:
    """Run :func:`bench_task` on ``p`` ranks: (per-rank results, placement, interconnect,
    nodes)."""
    common = {"backend": config.backend, "op_timeout_s": config.op_timeout_s,
              "deadline_s": config.deadline_s}
    if config.cluster_rate is not None:
        with EmulatedCluster(p, config.cluster_rate) as cluster:
            per_rank = launch(BENCH_TASK, payload, cluster.launch_spec(**common))
            placement, interconnect = cluster.describe(), cluster.interconnect()
        return per_rank, placement, interconnect, p
    per_rank = launch(BENCH_TASK, payload, LaunchSpec(p, **common))
    return (per_rank, "loopback", "loopback (127.0.0.1), all ranks on one machine", 1)


@dataclass
class _Sweep:
    """What the world sizes of one run gave: rows, LP chunks, timed calls, gammas."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    chunks: dict[str, dict[str, int]] = field(default_factory=dict)
    iterations: dict[str, dict[str, int]] = field(default_factory=dict)
    warmups: dict[str, dict[str, int]] = field(default_factory=dict)
    gammas: list[float] = field(default_factory=list)

    def add(self, per_rank: list[dict[str, Any]], config: BenchConfig, p: int,
            nodes: int) -> None:
        """Rank 0's rows at world size ``p``."""
        if per_rank[0].get("gamma_s_per_byte"):
            self.gammas.append(float(per_rank[0]["gamma_s_per_byte"]))
        for row in per_rank[0]["rows"]:
            if "lp_chunk_bytes" in row:
                self.chunks.setdefault(str(p), {})[str(row["bytes"])] = int(
                    row["lp_chunk_bytes"])
            self.iterations.setdefault(f"{row['algorithm']}/P={p}", {})[
                str(row["bytes"])] = int(row["iters"])
            self.warmups.setdefault(f"{row['algorithm']}/P={p}", {})[
                str(row["bytes"])] = int(row["warmup"])
            self.rows.append({
                "collective": config.collective, "backend": config.backend,
                "algorithm": row["algorithm"], "world_size": p, "nodes": nodes,
                "in_place": True, "bytes": int(row["bytes"]), "time_s": row["time_s"],
                "time_min_s": row["time_min_s"], "time_max_s": row["time_max_s"],
                "algbw_Bps": row["bytes"] / row["time_s"],
                "busbw_Bps": row["bytes"] / row["time_s"] * bus_factor(config.collective, p),
            })


def _bench_meta(config: BenchConfig, sweep: _Sweep, link: tuple[float, float, float],
                started: dt.datetime, placement: str, interconnect: str,
                load_before: Any, t0: float) -> dict[str, Any]:
    """The sidecar of the run's CommTrace (load after and wall time taken now)."""
    chunk_text = (f"fixed {config.lp_chunk_bytes:g} bytes" if config.lp_chunk_bytes
                  else "Wang et al.'s optimal b* for 'lp_link', at most 1024 chunks")
    return {
        "kind": "comm",
        "source": f"measured with gradsched bench collectives on {started.date().isoformat()} "
                  f"({placement})",
        "hardware": f"{hardware_summary()}; {placement}",
        "interconnect": interconnect,
        **line_rate_meta(config.cluster_rate),
        "software": comm_software_versions(config.backend),
        "statistic": "median",
        "warnings": [],
        "notes": (
            f"{config.collective} by gradsched's point-to-point algorithms "
            "(gradsched.collectives: isend/irecv) and by the library itself "
            "(algorithm 'default'); fp32 tensors, in place. Per size and algorithm: "
            f"up to {config.warmup} warm-up call(s) ('warmup_calls': fewer when they would "
            "take more than a quarter of target_s), then 'iterations' timed calls, each after "
            "a barrier (gradsched.capture.timers, as capture comm); a call's time is the "
            "slowest rank's; time_s is the median over calls, "
            "time_min_s/time_max_s the extremes. "
            f"LP chunk: {chunk_text} (per size in 'lp_chunk_bytes'). " + config.note),
        "capture_method": "gradsched bench collectives",
        "date": started.isoformat(timespec="seconds"),
        "world_sizes": list(config.world_sizes),
        "physical_machines": 1,
        "load_average": {"before": load_before, "after": load_average([])},
        "wall_s": round(time.monotonic() - t0, 3),
        "settings": {k: (list(v) if isinstance(v, tuple) else v)
                     for k, v in asdict(config).items() if k != "note"},
        "lp_link": {"alpha_s": link[0], "beta_s_per_byte": link[1], "gamma_s_per_byte": link[2]},
        "lp_chunk_bytes": sweep.chunks,
        "gamma_s_per_byte_measured": statistics.median(sweep.gammas) if sweep.gammas else None,
        "iterations": sweep.iterations,
        "warmup_calls": sweep.warmups,
    }


def run_bench(config: BenchConfig, log: Callable[[str], None] | None = None) -> Any:
    """Launch the sweep at every world size (loopback or emulated cluster); a CommTrace."""
    config.validate()
    sizes = size_grid(config.min_bytes, config.max_bytes, config.per_octave)
    link = _lp_link(config)
    payload = {"collective": config.collective, "algorithms": list(config.algorithms),
               "sizes": sizes, "min_iters": config.min_iters, "target_s": config.target_s,
               "max_iters": config.max_iters, "warmup": config.warmup,
               "lp_chunk_bytes": config.lp_chunk_bytes, "lp_link": list(link)}
    started = dt.datetime.now(dt.UTC).astimezone()
    load_before = load_average([])
    t0 = time.monotonic()
    sweep = _Sweep()
    placement = interconnect = ""
    for p in config.world_sizes:
        if log:
            log(f"bench {config.collective}: P={p}, {len(sizes)} sizes x "
                f"{len(config.algorithms)} algorithms"
                + (f", emulated cluster {config.cluster_rate}" if config.cluster_rate else ""))
        per_rank, placement, interconnect, nodes = _launch_at(p, config, payload)
        sweep.add(per_rank, config, p, nodes)
    frame = pd.DataFrame(sweep.rows)
    meta = _bench_meta(config, sweep, link, started, placement, interconnect, load_before, t0)
    return CommTrace.from_frame(frame, meta)
