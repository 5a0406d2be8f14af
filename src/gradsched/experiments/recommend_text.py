"""The advice of :mod:`gradsched.experiments.recommend` as text (``gradsched advise``):
the predicted settings side by side, each gain with its margin band, the recommendation,
and the commands that apply it (``gradsched plan``, ``gradsched run``, the DDP call)."""

from __future__ import annotations

import math
import shlex

from gradsched.experiments.recommend import (
    PLAN_ALGORITHM,
    DDPPoint,
    Recommendation,
    gain_pct,
)
from gradsched.ties import RTOL


def ddp_code(point: DDPPoint) -> str:
    """The DDP constructor call for ``point``."""
    if point.bucket_cap_mb is None:
        return "DistributedDataParallel(model)  # torch's default buckets"
    return f"DistributedDataParallel(model, bucket_cap_mb={point.bucket_cap_mb:g})"


def plan_command(rec: Recommendation, output: str = "plan.json") -> list[str]:
    """``gradsched plan`` that writes the recommended plan."""
    cmd = ["gradsched", "plan", "--compute", rec.compute, *rec.comm_args,
           "--world-size", str(rec.world_size), "--algorithm", PLAN_ALGORITHM,
           "--knob", f"{PLAN_ALGORITHM}.issue=executor",
           "--knob", f"{PLAN_ALGORITHM}.replay_iterations={rec.options['iterations']}"]
    for key in ("collective_cpu_s", "compute_slowdown", "comm_slowdown"):
        if key in rec.options:
            cmd += ["--knob", f"{PLAN_ALGORITHM}.{key}={rec.options[key]!r}"]
    if rec.forward_ratio is not None:
        cmd += ["--forward-ratio", f"{rec.forward_ratio:g}"]
    return [*cmd, "-o", output]


def run_command(rec: Recommendation, plan_file: str = "plan.json", backend: str = "gloo",
                model_name: str | None = None, batch_size: int | None = None) -> list[str]:
    """``gradsched run`` that times the plan against DDP at the recommended cap."""
    cap = rec.ddp_best.bucket_cap_mb
    cmd = ["gradsched", "run", "--plan", plan_file, "--baseline", "ddp",
           "--bucket-cap-mb", "default" if cap is None else f"{cap:g}",
           "--model", str(model_name or rec.model_name or "MODEL"),
           "--batch-size", str(batch_size or rec.batch_size or "BATCH"),
           "--world-size", str(rec.world_size), "--backend", backend]
    if rec.seq_len:
        cmd += ["--seq-len", str(rec.seq_len)]
    return [*cmd, "-o", "measured.csv"]


def _comm_label(rec: Recommendation) -> str:
    if rec.topology_collective is None:
        return f"comm {rec.comm}"
    return f"topology {rec.comm} ({rec.topology_collective} collectives)"


def sig(value: float, digits: int = 2) -> str:
    """``value`` to ``digits`` significant digits, trailing zeros kept, never in exponent
    form (``0.44``, ``3.1``, ``120``, ``38.0`` for 3 digits)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    return f"{round(value, decimals):.{max(decimals, 0)}f}"


def seconds(value: float) -> str:
    """A predicted time at the precision the model deserves: 3 significant digits."""
    return f"{sig(value, 3)} s"


def gain_text(rec: Recommendation, gain: float) -> str:
    """``+3.1 % (band -1.9 to +8.1 %)``: the gain and the gain +- margin (a gain within
    :data:`gradsched.ties.RTOL` is a tie, printed as 0)."""
    gain = 0.0 if abs(gain) < 100 * RTOL else gain

    def signed(v: float) -> str:
        return ("+" if v >= 0 else "-") + sig(abs(v))
    if not rec.margin.band_known:
        return f"{signed(gain)} % (band unknown)"
    return (f"{signed(gain)} % (band {signed(gain - rec.margin.pct)} to "
            f"{signed(gain + rec.margin.pct)} %)")


def _buckets(n: int) -> str:
    return f"{n} bucket{'' if n == 1 else 's'}"


def _rows(rec: Recommendation) -> list[tuple[str, float, str, str]]:
    """(name, seconds, size, gain) of each predicted setting."""
    cur = rec.ddp_current
    rows = [(f"PyTorch DDP, your setting: {cur.label}", cur.iteration_s,
             _buckets(cur.n_buckets), "")]
    rows.append((f"PyTorch DDP, best uniform cap: {rec.ddp_best.label}",
                 rec.ddp_best.iteration_s, _buckets(rec.ddp_best.n_buckets),
                 f"{gain_text(rec, rec.tuned_gain_pct)} vs your setting"))
    if rec.ddp_list is not None:
        rows.append(("PyTorch DDP, per-bucket caps (bucket_cap_mb_list)",
                     rec.ddp_list.iteration_s, _buckets(rec.ddp_list.n_buckets),
                     f"{gain_text(rec, rec.list_gain_pct or 0.0)} vs best uniform cap"))
    winner = rec.plan.info.get("winner", PLAN_ALGORITHM)
    rows.append((f"gradsched plan ({PLAN_ALGORITHM}: {winner})", rec.plan_s,
                 f"{_buckets(rec.plan.n_buckets)}, {rec.plan_collectives_per_iter} collectives",
                 f"{gain_text(rec, rec.gain_pct)} vs tuned DDP"))
    return rows


def _decision(rec: Recommendation, plan_out: str | None, backend: str) -> list[str]:
    """The RECOMMENDATION lines for :attr:`Recommendation.choice`."""
    margin = (f"the {rec.margin.pct:.3g} % margin" if rec.margin.band_known
              else f"the default {rec.margin.pct:.3g} % threshold (the band is unknown)")
    current_s = rec.ddp_current.iteration_s
    if rec.memory is not None and not rec.memory.fits:
        return ["RECOMMENDATION: none: DDP cannot run this model on this GPU, whatever its "
                "buckets:",
                f"  {rec.memory.text()}",
                "  the times above are what the model says were memory no object; shard the "
                "model instead (gradsched advise --sharded)"]
    if rec.choice == "keep":
        fastest = min(rec.ddp_tuned_s, rec.plan_s)
        return [f"RECOMMENDATION: keep your setting: {ddp_code(rec.ddp_current)}",
                f"  nothing is predicted faster by more than {margin}: the best uniform cap "
                f"{gain_text(rec, rec.tuned_gain_pct)}, the fastest candidate "
                f"{gain_text(rec, gain_pct(current_s, fastest))} vs your setting."]
    if rec.choice == "uniform":
        return [f"RECOMMENDATION: use {ddp_code(rec.ddp_best)}",
                f"  predicted {gain_text(rec, rec.tuned_gain_pct)} vs your setting, more than "
                f"{margin}; per-bucket caps and the gradsched plan do not beat it by more."]
    if rec.choice == "list":
        assert rec.ddp_list is not None
        return [f"RECOMMENDATION: per-bucket caps, {rec.ddp_list.n_buckets} buckets "
                "(stock PyTorch >= 2.14; DDP rebuilds its buckets with them after the first "
                "iteration):",
                f"  {rec.ddp_list.caps.paste_line()}",
                f"  predicted {gain_text(rec, rec.list_gain_pct or 0.0)} vs the best uniform "
                f"cap, more than {margin}; "
                f"{gain_text(rec, gain_pct(current_s, rec.ddp_list.iteration_s))} vs your "
                "setting.",
                f"  otherwise use {ddp_code(rec.ddp_best)}"]
    out = plan_out or "plan.json"
    return [
        f"RECOMMENDATION: run the gradsched plan: predicted {gain_text(rec, rec.gain_pct)} vs "
        f"tuned DDP, more than {margin}.",
        f"  1. make the plan:  {shlex.join(plan_command(rec, out))}"
        + (f"  (or take {plan_out}, written at the end)" if plan_out else ""),
        f"  2. time it against tuned DDP:  {shlex.join(run_command(rec, out, backend))}",
        f"  3. in your script: ex = PlanExecutor(model, Plan.load({out!r}), optimizer); "
        "loss.backward(); ex.step()  (instead of DDP; see docs/executor.md)",
        f"  otherwise use {ddp_code(rec.ddp_best)}",
    ]


def render(rec: Recommendation, *, plan_out: str | None = None, backend: str = "gloo",
           validate_hint: str | None = None) -> str:
    """The human text of the advice."""
    who = rec.model_name or "the traced model"
    batch = f", batch {rec.batch_size} per rank" if rec.batch_size else ""
    lines = [f"gradsched advise: {who}{batch}, {rec.world_size} ranks",
             f"  compute trace {rec.compute}; {_comm_label(rec)}",
             f"predicted iteration time (replay, executor issue order, "
             f"{rec.options['iterations']} iterations):"]
    rows = _rows(rec)
    width = max(len(r[0]) for r in rows)
    for name, secs, size, gain in rows:
        lines.append(f"  {name:<{width}}  {seconds(secs):>10}  {size:<28} {gain}".rstrip())
    sweep = ", ".join(f"{'default' if p.bucket_cap_mb is None else f'{p.bucket_cap_mb:g}'}:"
                      f"{sig(p.iteration_s, 3)}" for p in rec.ddp_sweep)
    lines.append(f"  DDP sweep (bucket_cap_mb: seconds): {sweep}")
    if rec.margin.band_known:
        lines.append(f"margin: {rec.margin.pct:.3g} % ({rec.margin.source}); each band is "
                     "the gain +- this margin, the model's (held-out) error band, not a "
                     "statistical confidence interval")
    else:
        lines.append(f"margin: {rec.margin.source}")
    lines += _decision(rec, plan_out, backend)
    lines += [f"note: {n}" for n in rec.notes]
    if validate_hint:
        lines.append(validate_hint)
    return "\n".join(lines) + "\n"
