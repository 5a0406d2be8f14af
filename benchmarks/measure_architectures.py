"""Re-measure the hierarchical and parameter-server runs (``gradsched report architectures``).

Runs, with ``gradsched run`` on the emulated cluster, the committed plans of
``paper/data/reexec/architectures/`` (the same three DDP buckets reduced flat, hierarchically on
2 nodes x 2 ranks, and through one parameter server with 2 workers) at each link rate,
``--rounds`` times with the order of the 2 x 2 pair alternated, and writes the measured JSON
that ``gradsched report architectures`` reads. The replay's prediction of every run is
carried over from the committed JSON (the same plans and models: the replay is a pure
function of them). Each run records the 1-minute load average before and after and the
CPU cores busy before it starts (:func:`gradsched.runtime.load.busy_cores`); a run does not
start while the machine is busy unless ``--allow-load``.

    sudo .venv/bin/python benchmarks/measure_architectures.py [--rates 1gbit 100mbit] \\
        [--iters 10] [--warmup 3] [--rounds 2] -o paper/data/reexec/architectures/measured.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gradsched.provenance import git_commit

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "paper/data/reexec/architectures"
FLAT, HIER, PS = (DATA / f"ddp-{k}.plan.json" for k in ("flat", "hierarchical", "ps"))


def _run(args: list[str], out: Path) -> list[dict[str, Any]]:
    """``gradsched run`` -> one entry per plan: per-iteration times in run order."""
    cmd = [str(REPO / ".venv/bin/gradsched"), "run", *args, "-o", str(out)]
    subprocess.run(cmd, check=True, cwd=REPO, timeout=3600)
    import pandas as pd

    frame = pd.read_csv(out)
    return [{"plan": plan, "times": group.sort_values("iteration")["iteration_s"].tolist()}
            for plan, group in frame.groupby("plan", sort=False)]


def _stats(times: list[float]) -> dict[str, float]:
    from gradsched.runtime.bench import percentile

    return {"median_s": statistics.median(times), "p10_s": percentile(times, 10),
            "p90_s": percentile(times, 90)}


def _predicted(previous: list[dict[str, Any]], rate: str, workers: int,
               plan: Path) -> float:
    for run in previous:
        if (run["bandwidth"] == rate and int(run["workers"]) == workers
                and Path(run["plan_file"]).name == plan.name):
            return float(run["predicted_iteration_s"])
    raise SystemExit(f"no committed prediction for {plan.name} at {rate}, {workers} workers")


def measure(rates: list[str], iters: int, warmup: int, rounds: int,
            allow_load: bool) -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO / "src"))
    from gradsched.reexec.run import FOREIGN_LIMIT_CORES
    from gradsched.runtime.load import busy_cores

    previous = json.loads((DATA / "measured.json").read_text())["measured"]
    common = ["--model", "resnet18", "--batch-size", "16", "--iters", str(iters),
              "--warmup", str(warmup)]
    jobs = []
    for rate in rates:
        for r in range(1, rounds + 1):
            pair = [FLAT, HIER] if r % 2 else [HIER, FLAT]
            jobs.append((rate, r, 4, "2 nodes x 2 ranks (one namespace per node)",
                         ["--world-size", "4", "--ranks-per-node", "2"], pair))
            jobs.append((rate, r, 2, "2 workers + 1 server, one namespace each",
                         ["--world-size", "2", "--ps-servers", "1"], [PS]))
            jobs.append((rate, r, 2, "2 ranks, one namespace each", ["--world-size", "2"],
                         [FLAT]))
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (rate, r, workers, layout, extra, plans) in enumerate(jobs):
            busy = busy_cores(2.0)
            if busy is not None and busy >= FOREIGN_LIMIT_CORES and not allow_load:
                raise SystemExit(f"{busy:.2f} cores busy before run {k}: stop other work "
                                 "or pass --allow-load")
            before = os.getloadavg()
            args = [*common, "--cluster", rate, *extra]
            for plan in plans:
                args += ["--plan", str(plan.relative_to(REPO))]
            results = _run(args, Path(tmp) / f"run{k}.csv")
            after = os.getloadavg()
            for plan, res in zip(plans, results, strict=True):
                pred = _predicted(previous, rate, workers, plan)
                stats = _stats(res["times"])
                out.append({
                    "algorithm": "ddp", "bandwidth": rate, "workers": workers,
                    "layout": layout, "round": r,
                    "plan_file": str(plan.relative_to(REPO)),
                    "command": "gradsched run " + " ".join(args),
                    "iteration_s": res["times"], "iterations": len(res["times"]), **stats,
                    "predicted_iteration_s": pred,
                    "prediction_error_pct": 100.0 * (pred - stats["median_s"])
                    / stats["median_s"],
                    "n_collectives": None, "busy_cores_before": busy,
                    "loadavg_1_5_15_before": [round(v, 2) for v in before],
                    "loadavg_1_5_15_after": [round(v, 2) for v in after]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", nargs="+", default=["1gbit", "100mbit"])
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--allow-load", action="store_true")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    old = json.loads((DATA / "measured.json").read_text())
    runs = measure(args.rates, args.iters, args.warmup, args.rounds, args.allow_load)
    commit = git_commit(REPO)
    data = {**old, "measured": runs}
    data["provenance"] = {**old.get("provenance", {}), "git_commit": commit,
                          "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ"),
                          "method": "benchmarks/measure_architectures.py: each run refused "
                                    "while >= 0.25 cores were busy before it"}
    data["caveats"] = [c for c in old.get("caveats", []) if "shared with other" not in c] + [
        "4 ranks of the 2x2 runs oversubscribe the 2 cores (compute slows ~2x): the replay, "
        "whose compute is the single-process trace, under-predicts them; the ratios of runs "
        "of the same layout cancel most of it"]
    tmp = args.output.with_name(f".{args.output.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.chmod(tmp, 0o644)
    tmp.replace(args.output)
    print(f"wrote {args.output} ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
