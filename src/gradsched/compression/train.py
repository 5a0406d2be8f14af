"""The real data-parallel training experiment, and the exactness checks, as launcher tasks.

Both run on every rank of :func:`gradsched.distributed.launch` (gloo on loopback):

* :func:`check_task` -- exactness of every compressor on random buckets (density 1 equals
  a dense all-reduce; per-rank mass conservation of the residuals; every rank ends with
  the same indices and results; the bytes passed to collectives equal
  ``Compressor.bytes_sent``). ``tests/compression/test_compression.py`` asserts on its report.
* :func:`train_task` -- trains a small MLP on scikit-learn's bundled digits data set
  (8x8 images, 10 classes, 1,797 samples; a fixed stratified 80/20 split, never
  downloaded) for each configuration (method, density, seed) in turn, in one process
  group, with one compressor call per bucket (one bucket per ``nn.Linear``: weight and
  bias flattened together, as the executor's buckets). Every ``eval_every`` steps it
  records test accuracy, the training loss (mean over ranks of the local mini-batch loss),
  the *measured* training wall-clock (``time.perf_counter``, evaluation excluded, maximum
  over ranks) and the bytes this rank passed to collectives in that step (counted by
  :class:`~gradsched.compression.base.Comm`, checked against the formula).
* :func:`run_experiment` -- the driver (``gradsched compress train``): launches
  :func:`train_task`, writes ``curves.csv``, ``summary.csv`` and ``settings.json``.

Optimizer: SGD; the dense baseline uses the optimizer's momentum; compressors use DGC's
momentum correction with the same coefficient and an optimizer *without* momentum (Lin et
al., ICLR 2018), importance-weighted pruning included (our choice, for a like-for-like
comparison; Cheng & Xu's residual rule is the ``momentum = 0`` case).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.compression import DistComm, make_compressor
from gradsched.distributed.launch import LaunchSpec, launch
from gradsched.io import write_csv_atomic, write_json_atomic
from gradsched.provenance import load_average

CURVE_COLUMNS = ["method", "density", "seed", "step", "wallclock_s", "train_loss",
                 "test_accuracy", "bytes_sent", "bytes_received"]
SUMMARY_COLUMNS = ["method", "density", "n_seeds", "final_accuracy_mean",
                   "final_accuracy_std", "best_accuracy_mean", "bytes_per_step",
                   "dense_bytes_per_step", "compression_ratio", "bytes_received_per_step",
                   "wallclock_s_mean", "wallclock_s_std", "time_per_step_s_mean"]


# ---------------------------------------------------------------------------- exactness
def _digest(t: Any) -> str:
    return hashlib.sha256(t.detach().contiguous().cpu().numpy().tobytes()).hexdigest()[:16]


@dataclass
class _CheckReport:
    """One rank's failures, digests and worst errors (what :func:`check_task` returns)."""

    rank: int
    failures: list[str] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    worst: dict[str, float] = field(default_factory=dict)

    def fail(self, msg: str) -> None:
        self.failures.append(f"rank {self.rank}: {msg}")

    def note(self, key: str, err: float) -> None:
        self.worst[key] = max(self.worst.get(key, 0.0), err)


def _check_bytes(report: _CheckReport, comp: Any, comm: Any, tag: str, step: int, n: int,
                 world_size: int) -> None:
    """The bytes actually passed to (and got from) collectives == the formulas."""
    want = comp.bytes_sent(n, world_size)
    if comm.total_sent_bytes != want:
        report.fail(f"{tag} step {step}: sent {comm.total_sent_bytes} B, "
                    f"formula {want} B")
    got = comp.bytes_received(n, world_size)
    if comm.total_received_bytes != got:
        report.fail(f"{tag} step {step}: received {comm.total_received_bytes} "
                    f"B, formula {got} B")


def _check_result(report: _CheckReport, out: Any, sent: Any, grad: Any, density: float,
                  tag: str, step: int, world_size: int) -> None:
    """The result is the mean of what the ranks sent; at density 1, a dense all-reduce."""
    import torch.distributed as dist

    ref = sent.clone()
    dist.all_reduce(ref)
    ref /= world_size
    err = float((out - ref).abs().max())
    bound = 4 * world_size * 2**-24 * float(ref.abs().max() + 1e-30) * 2
    report.note(tag + "/sum", err)
    if err > bound + 1e-7:
        report.fail(f"{tag} step {step}: result differs from the mean of the "
                    f"sent vectors by {err:.3g}")
    if density >= 1.0:  # density 1: a dense all-reduce of the gradient
        dense = grad.clone()
        dist.all_reduce(dense)
        dense /= world_size
        derr = float((out - dense).abs().max())
        report.note(tag + "/dense", derr)
        if derr > 1e-5 * float(dense.abs().max()) + 1e-6:
            report.fail(f"{tag} step {step}: density 1 differs from dense "
                        f"all-reduce by {derr:.3g}")


def _record_digests(report: _CheckReport, comp: Any, state: Any, out: Any, tag: str,
                    step: int) -> None:
    """Digests of the result and the chosen indices (compared across ranks)."""
    import torch

    report.digests[f"{tag}/{step}/out"] = _digest(out)
    if state.last_root is not None:
        report.digests[f"{tag}/{step}/root"] = str(state.last_root)
    if comp.name in ("importance",):
        report.digests[f"{tag}/{step}/idx"] = _digest(torch.sort(state.last_indices).values)
    if comp.name == "gtopk":
        report.digests[f"{tag}/{step}/idx"] = _digest(state.extra["global_indices"])


@dataclass(frozen=True)
class _CheckCase:
    """One case of the self-check: ``steps`` steps of a compressor at ``density`` and
    ``momentum`` on one random bucket of ``n`` elements (drawn from ``seed``), among
    ``world_size`` ranks; ``tag`` names the case in failures and digests."""

    tag: str
    n: int
    density: float
    momentum: float
    steps: int
    seed: int
    world_size: int


def _check_compressor(report: _CheckReport, comp: Any, comm: Any, case: _CheckCase) -> None:
    """``case.steps`` steps of one compressor on one random bucket of ``case.n`` elements."""
    import torch

    tag, n, density, momentum = case.tag, case.n, case.density, case.momentum
    steps, seed, world_size = case.steps, case.seed, case.world_size
    rank = report.rank
    state = comp.init_state(n, track=True)
    gen = torch.Generator().manual_seed(seed * 7919 + rank * 104729 + n)
    param = torch.randn(n, generator=gen)
    u_prev = torch.zeros(n)
    raw_sum = torch.zeros(n, dtype=torch.float64)
    sent_sum = torch.zeros(n, dtype=torch.float64)
    abs_sum = torch.zeros(n, dtype=torch.float64)
    for step in range(steps):
        grad = torch.randn(n, generator=gen) * (1 + step)
        # the accumulation DGC sends from: u = m u + g (u is masked after)
        u = momentum * u_prev + grad if momentum > 0 else grad
        raw_sum += u.double()
        abs_sum += u.double().abs()
        comm.reset()
        out = comp.compress_and_reduce(grad, param, state, comm, step)
        u_prev = state.momentum.clone() if state.momentum is not None else u_prev
        _check_bytes(report, comp, comm, tag, step, n, world_size)
        sent = state.last_sent if state.last_sent is not None else grad
        if comp.name != "dense" and int((sent != 0).sum()) > comp.k(n):
            report.fail(f"{tag} step {step}: sent more than k={comp.k(n)} entries")
        sent_sum += sent.double()
        _check_result(report, out, sent, grad, density, tag, step, world_size)
        _record_digests(report, comp, state, out, tag, step)
    # mass conservation: sum(sent) + residual == sum(u), per rank
    if state.residual is not None:
        lhs = sent_sum + state.residual.double()
        err = float((lhs - raw_sum).abs().max())
        tol = 8 * steps * 2**-24 * float(abs_sum.max()) + 1e-6
        report.note(tag + "/mass", err)
        if err > tol:
            report.fail(f"{tag}: mass not conserved, max error {err:.3g} > {tol:.3g}")


def check_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Run every compressor for a few steps on random buckets; report failures and digests.

    payload: ``methods``, ``densities``, ``sizes`` (bucket numels), ``steps``, ``seed``,
    ``momenta``.
    """
    import torch

    torch.use_deterministic_algorithms(True)
    report = _CheckReport(rank)
    comm = DistComm()
    steps = int(payload.get("steps", 4))
    seed = int(payload.get("seed", 0))
    for method, density, momentum, n in itertools.product(
            payload["methods"], payload["densities"], payload.get("momenta", [0.0]),
            payload["sizes"]):
        tag = f"{method}/d={density:g}/m={momentum:g}/n={n}"
        if method == "gtopk" and world_size & (world_size - 1):
            continue
        comp = make_compressor(method, density, momentum=momentum, seed=seed)
        _check_compressor(report, comp, comm, _CheckCase(
            tag=tag, n=n, density=density, momentum=momentum, steps=steps, seed=seed,
            world_size=world_size))
    return {"rank": rank, "failures": report.failures, "digests": report.digests,
            "worst": report.worst}


# ---------------------------------------------------------------------------- training
@dataclass
class TrainSettings:
    """Everything that defines the experiment (written to ``settings.json``)."""

    world_size: int = 4
    methods: tuple[str, ...] = ("dense", "topk", "importance")
    densities: tuple[float, ...] = (1 / 16, 1 / 64, 1 / 256)
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 600
    eval_every: int = 20
    batch_per_rank: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    hidden: tuple[int, ...] = (128, 64)
    test_fraction: float = 0.2
    split_seed: int = 0
    threads_per_rank: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def configs(self) -> list[dict[str, Any]]:
        """(method, density, seed) in run order; dense once, at density 1."""
        out = []
        for seed in self.seeds:
            for method in self.methods:
                for density in ([1.0] if method == "dense" else self.densities):
                    out.append({"method": method, "density": density, "seed": seed})
        return out


def digits_split(test_fraction: float = 0.2, split_seed: int = 0
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits, a fixed stratified split, features standardised with
    the training set's mean and standard deviation (float32)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = data.data.astype(np.float32)
    y = data.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_fraction,
                                              random_state=split_seed, stratify=y)
    mean = x_tr.mean(axis=0)
    std = x_tr.std(axis=0) + 1e-3
    return (x_tr - mean) / std, y_tr, (x_te - mean) / std, y_te


def _mlp(hidden: Sequence[int], seed: int) -> Any:
    import torch
    from torch import nn

    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    width = 64
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


class _Batches:
    """The same global batches on every rank: consecutive slices of a permutation of the
    training set, a fresh permutation whenever the next batch would run past its end."""

    def __init__(self, n_train: int, global_batch: int, seed: int) -> None:
        import torch

        self.gen = torch.Generator().manual_seed(10_000 + seed)  # same batches on every rank
        self.n_train = n_train
        self.global_batch = global_batch
        self.order = torch.randperm(n_train, generator=self.gen)
        self.cursor = 0

    def next(self) -> Any:
        import torch

        if self.cursor + self.global_batch > self.n_train:
            self.order = torch.randperm(self.n_train, generator=self.gen)
            self.cursor = 0
        batch = self.order[self.cursor:self.cursor + self.global_batch]
        self.cursor += self.global_batch
        return batch


def _reduce_buckets(comp: Any, buckets: list[list[Any]], states: list[Any], comm: Any,
                    step: int) -> None:
    """Compress and reduce each bucket's gradient; write the result back to ``.grad``."""
    import torch

    for k, params in enumerate(buckets):
        flat_g = torch.cat([p.grad.reshape(-1) for p in params])
        flat_w = torch.cat([p.detach().reshape(-1) for p in params])
        avg = comp.compress_and_reduce(flat_g, flat_w, states[k], comm, step)
        offset = 0
        for p in params:
            p.grad.copy_(avg[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


def _add_train_loss(rows: list[dict[str, Any]], losses: Any, world: int, window: int) -> None:
    """Mean training loss over ranks and over the last ``window`` steps of each row (one
    all-reduce, after timing)."""
    import torch.distributed as dist

    dist.all_reduce(losses)
    losses /= world
    for row in rows:
        st = row["step"]
        row["train_loss"] = (float(losses[max(1, st - window + 1):st + 1].mean())
                             if st > 0 else math.nan)


def _run_one(rank: int, world: int, cfg: dict[str, Any], s: TrainSettings,
             data: tuple[Any, Any, Any, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    x_tr, y_tr, x_te, y_te = data
    seed = int(cfg["seed"])
    model = _mlp(s.hidden, seed)
    comp = make_compressor(cfg["method"], cfg["density"],
                           momentum=0.0 if cfg["method"] == "dense" else s.momentum,
                           seed=seed)
    opt = torch.optim.SGD(model.parameters(), lr=s.lr,
                          momentum=0.0 if comp.owns_momentum else s.momentum)
    buckets = [list(m.parameters()) for m in model if isinstance(m, torch.nn.Linear)]
    numels = [sum(p.numel() for p in b) for b in buckets]
    states = [comp.init_state(n) for n in numels]
    formula = sum(comp.bytes_sent(n, world) for n in numels)
    formula_in = sum(comp.bytes_received(n, world) for n in numels)
    dense_formula = sum(4 * n for n in numels)
    comm = DistComm()
    batches = _Batches(len(y_tr), s.batch_per_rank * world, seed)

    def evaluate() -> float:
        with torch.no_grad():
            pred = model(x_te).argmax(dim=1)
        return float((pred == y_te).float().mean())

    rows: list[dict[str, Any]] = []
    losses = torch.zeros(s.steps + 1)
    elapsed = 0.0
    dist.barrier()
    rows.append({"step": 0, "wallclock_s": 0.0, "test_accuracy": evaluate(),
                 "bytes_sent": 0, "bytes_received": 0})
    dist.barrier()
    for step in range(1, s.steps + 1):
        t0 = time.perf_counter()
        batch = batches.next()
        mine = batch[rank * s.batch_per_rank:(rank + 1) * s.batch_per_rank]
        loss = F.cross_entropy(model(x_tr[mine]), y_tr[mine])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        comm.reset()
        _reduce_buckets(comp, buckets, states, comm, step)
        opt.step()
        elapsed += time.perf_counter() - t0
        losses[step] = float(loss.detach())
        sent, got = comm.total_sent_bytes, comm.total_received_bytes
        if sent != formula or got != formula_in:
            raise RuntimeError(f"rank {rank}: {cfg}: step {step} passed {sent} B to "
                               f"collectives and got {got} B back; the formulas say "
                               f"{formula} B and {formula_in} B")
        if step % s.eval_every == 0 or step == s.steps:
            acc = evaluate()
            rows.append({"step": step, "wallclock_s": elapsed, "test_accuracy": acc,
                         "bytes_sent": sent, "bytes_received": got})
            dist.barrier()  # every rank restarts its clock together
    _add_train_loss(rows, losses, world, s.eval_every)
    params_digest = _digest(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    return {"config": cfg, "rows": rows, "params_digest": params_digest,
            "bytes_formula": formula, "dense_bytes": dense_formula, "bucket_numels": numels,
            "k_per_bucket": [comp.k(n) for n in numels] if cfg["method"] != "dense"
            else numels}


def train_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Train every configuration of ``payload['settings']`` in turn (see module doc)."""
    import torch

    raw = dict(payload["settings"])
    raw = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
    s = TrainSettings(**raw)
    torch.set_num_threads(s.threads_per_rank)
    x_tr, y_tr, x_te, y_te = digits_split(s.test_fraction, s.split_seed)
    data = (torch.from_numpy(x_tr), torch.from_numpy(y_tr), torch.from_numpy(x_te),
            torch.from_numpy(y_te))
    configs = payload.get("configs") or s.configs()
    runs = []
    for cfg in configs:
        t0 = time.perf_counter()
        out = _run_one(rank, world_size, cfg, s, data)
        out["run_s"] = time.perf_counter() - t0
        runs.append(out)
    return {"rank": rank, "runs": runs, "torch": torch.__version__}


# ---------------------------------------------------------------------------- driver
def _merge(results: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
    """Curves frame from every rank's runs (wall-clock: max over ranks); consistency checks."""
    rows = []
    meta = []
    for i, run0 in enumerate(results[0]["runs"]):
        cfg = run0["config"]
        digests = {r["runs"][i]["params_digest"] for r in results}
        if len(digests) != 1:
            raise RuntimeError(f"{cfg}: the ranks ended with different parameters")
        for j, row in enumerate(run0["rows"]):
            wall = max(r["runs"][i]["rows"][j]["wallclock_s"] for r in results)
            rows.append({"method": cfg["method"], "density": cfg["density"],
                         "seed": cfg["seed"], "step": row["step"], "wallclock_s": wall,
                         "train_loss": row["train_loss"], "test_accuracy": row["test_accuracy"],
                         "bytes_sent": row["bytes_sent"],
                         "bytes_received": row["bytes_received"]})
        meta.append({**cfg, "bytes_formula": run0["bytes_formula"],
                     "dense_bytes": run0["dense_bytes"], "k_per_bucket": run0["k_per_bucket"],
                     "bucket_numels": run0["bucket_numels"],
                     "run_s_max": max(r["runs"][i]["run_s"] for r in results)})
    return pd.DataFrame(rows, columns=CURVE_COLUMNS), meta


def summarize(curves: Any) -> Any:
    """Per (method, density): final accuracy mean/std over seeds, bytes per step (measured,
    per rank), compression ratio vs dense (dense bytes / bytes), wall-clock."""
    if curves.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    last = curves.sort_values("step").groupby(["method", "density", "seed"]).tail(1)
    best = curves.groupby(["method", "density", "seed"])["test_accuracy"].max().reset_index()
    trained = curves[curves["step"] > 0]
    bytes_per = trained.groupby(["method", "density"])["bytes_sent"].mean()
    received = trained.groupby(["method", "density"])["bytes_received"].mean()
    dense_rows = trained[trained["method"] == "dense"]
    dense_bytes = float(dense_rows["bytes_sent"].mean()) if len(dense_rows) else math.nan
    steps = last.set_index(["method", "density", "seed"])["step"]
    out = []
    for (method, density), g in last.groupby(["method", "density"], sort=False):
        b = best[(best["method"] == method) & (best["density"] == density)]
        per_step = (g["wallclock_s"] / steps.loc[list(zip(g["method"], g["density"], g["seed"],
                                                          strict=True))].to_numpy())
        nbytes = float(bytes_per.loc[(method, density)])
        out.append({
            "method": method, "density": density, "n_seeds": int(g["seed"].nunique()),
            "final_accuracy_mean": float(g["test_accuracy"].mean()),
            "final_accuracy_std": float(g["test_accuracy"].std(ddof=1)) if len(g) > 1
            else math.nan,
            "best_accuracy_mean": float(b["test_accuracy"].mean()),
            "bytes_per_step": nbytes, "dense_bytes_per_step": dense_bytes,
            "compression_ratio": dense_bytes / nbytes if nbytes > 0 else math.nan,
            "bytes_received_per_step": float(received.loc[(method, density)]),
            "wallclock_s_mean": float(g["wallclock_s"].mean()),
            "wallclock_s_std": float(g["wallclock_s"].std(ddof=1)) if len(g) > 1
            else math.nan,
            "time_per_step_s_mean": float(np.mean(per_step)),
        })
    frame = pd.DataFrame(out, columns=SUMMARY_COLUMNS)
    order = {"dense": 0, "topk": 1, "importance": 2, "gtopk": 3}
    frame["_o"] = frame["method"].map(lambda m: order.get(m, 9))
    return frame.sort_values(["_o", "density"], ascending=[True, False]).drop(
        columns="_o").reset_index(drop=True)


def run_experiment(settings: TrainSettings, out_dir: str | Path,
                   log: Callable[[str], None] | None = None,
                   deadline_s: float = 3600.0) -> dict[str, Any]:
    """Launch the training on ``settings.world_size`` gloo ranks (loopback) and write
    ``curves.csv``, ``summary.csv`` and ``settings.json`` under ``out_dir`` (atomically).
    Returns the summary as records."""
    import torch

    out = Path(out_dir)
    log = log or (lambda _m: None)
    configs = settings.configs()
    log(f"training {len(configs)} configurations on {settings.world_size} gloo ranks ...")
    load_before = load_average()
    t0 = time.perf_counter()
    results = launch("gradsched.compression.train:train_task",
                     {"settings": asdict(settings), "configs": configs},
                     LaunchSpec(settings.world_size, threads_per_rank=settings.threads_per_rank,
                                op_timeout_s=300, deadline_s=deadline_s))
    total_s = time.perf_counter() - t0
    load_after = load_average()
    curves, meta = _merge(results)
    summary = summarize(curves)
    write_csv_atomic(out / "curves.csv", curves)
    write_csv_atomic(out / "summary.csv", summary)
    write_json_atomic(out / "settings.json", {
        "experiment": "data-parallel MLP on scikit-learn digits, gradient compression",
        "settings": asdict(settings),
        "dataset": {"name": "sklearn.datasets.load_digits", "n_train": 1437, "n_test": 360,
                    "features": 64, "classes": 10},
        "backend": "gloo (loopback, one host)",
        "measured": {"total_wall_s": round(total_s, 3), "runs": meta},
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "machine": platform.machine(), "system": platform.system(),
                        "processor": platform.processor() or "unknown",
                        "cpu_count": os.cpu_count(),
                        "loadavg_1_5_15min_before": load_before,
                        "loadavg_1_5_15min_after": load_after,
                        "note": "wall-clock is measured on a machine shared with other "
                                "processes (see the load averages): compare methods within "
                                "this run, not across machines"},
        "columns": {"curves.csv": {
            "wallclock_s": "measured training time since step 0 (evaluation excluded), "
                           "max over ranks",
            "train_loss": "mean over ranks and over the last eval_every steps of the "
                          "local mini-batch cross-entropy",
            "bytes_sent": "bytes this rank passed to collectives in that step (counted: "
                          "input sizes)",
            "bytes_received": "bytes of collective results this rank got back in that "
                              "step (counted: all-gather output = P x input)"},
            "summary.csv": {"compression_ratio": "dense bytes sent per step / bytes sent "
                                                 "per step",
                            "final_accuracy_std": "sample std over seeds (ddof=1)"}},
        "provenance": "gradsched compress train (gradsched.compression.train.run_experiment)",
    })
    log(f"done in {total_s:.1f} s; wrote {out}/curves.csv, summary.csv, settings.json")
    return {"summary": json.loads(summary.to_json(orient="records")), "total_s": total_s}
