"""What every option of every ``gradsched`` sub-command does, and how that is shown: the
registry of ``test_every_option.py`` (entry kinds in ``option_probes.py``).

A probe's inputs are small committed traces, copied into the inputs folder ``{d}`` by
:func:`make_inputs` (with a few files made from them there); outputs are written relative
to each run's own working folder.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from gradsched.experiments.at_scale.record import SWITCH_VARIANTS
from tests.robustness.option_probes import (
    REPO,
    CoveredBy,
    Entry,
    Exempt,
    Output,
    Probe,
    Unprobed,
    more,
    refused,
)

HELP = Exempt("argparse's own --help: prints the usage and exits 0, nothing else")

SLOW = ("report figure", "bench collectives-report", "compress report", "reexec analyze",
        "reexec accum", "reexec collect")
"""Commands whose probes take more than a few seconds (figures, bootstrap intervals,
replays of measured cases): marked slow."""

# --------------------------------------------------------------------------- inputs

C = "{d}/c.csv"  # ResNet-18, batch 4, CPU: measured forward, 62 tensors
C16 = "{d}/c16.csv"  # the same model at batch 16
M = "{d}/m.csv"  # gloo all-reduce (and more) sweep, 2 ranks, 1 Gbit/s
AB = "alpha-beta:alpha=1e-4,beta=1e-9"

COPIED = {
    "c": "traces/compute/cpu/resnet18-b4-cpu-fp32",
    "c16": "traces/compute/cpu/resnet18-b16-cpu-fp32",
    "m": "traces/comm/cpu/gloo-tbf1gbit-p2",
    "m3": "traces/comm/cpu/gloo-tbf1gbit-p3",
    "m4": "traces/comm/cpu/gloo-tbf1gbit-p4",
    "p2p": "traces/comm/cpu/gloo-p2p-tbf1gbit",
    "m100": "traces/comm/cpu/gloo-tbf100mbit-p2",
    "a2": "traces/comm/external/nccl-abci-inter-anode-2",  # NCCL, 2 x 8 A100
    "a4": "traces/comm/external/nccl-abci-inter-anode-4",
}


def make_inputs(d: Path) -> None:
    """The probes' inputs in ``d``."""
    for name, stem in COPIED.items():
        for suffix in (".csv", ".meta.json"):
            shutil.copyfile(REPO / f"{stem}{suffix}", d / f"{name}{suffix}")
    (d / "inter.json").write_text(
        '{"compute_slowdown": 1.5, "comm_slowdown": 1.2, "collective_cpu_s": 0.0001}\n',
        encoding="utf-8")
    cross_head = ("series,collective,algorithm,fit_world_sizes,predict_world_size,nodes,role,"
                  "mape_pct,max_ape_pct\n")
    for name, mape in (("cw", 5.0), ("cw2", 50.0)):  # two cross-world-size tables
        (d / f"{name}.csv").write_text(
            cross_head + f"s,all_reduce,x,16,16,2,fitted,1.0,2.0\n"
            f"s,all_reduce,x,16,32,4,predicted,{mape},{2 * mape}\n", encoding="utf-8")
    (d / "topo.yaml").write_text(
        "nodes: 2\nranks_per_node: 2\n"
        "intra: {kind: analytic, alpha_s: 1.0e-5, beta_s_per_byte: 1.0e-10, algorithm: ring}\n"
        "inter: {kind: analytic, alpha_s: 1.0e-4, beta_s_per_byte: 1.0e-9, algorithm: ring}\n",
        encoding="utf-8")
    summary = json.loads((REPO / "data/h200/kineto-steps/kineto-steps-summary.json")
                         .read_text(encoding="utf-8"))
    for medians in summary["resnet50-b64-cuda-fp32"]["cuda_event_medians_s"].values():
        medians["backward"] *= 1.25
    (d / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    spec = (REPO / "config/published-scaling.yaml").read_text(encoding="utf-8")
    spec = spec.replace("traces/", f"{REPO}/traces/")
    (d / "scaling.yaml").write_text(spec, encoding="utf-8")
    (d / "scaling2.yaml").write_text(spec.replace("2855", "2000"), encoding="utf-8")
    _kineto_inputs(d)
    (d / "topo-slow.yaml").write_text(
        "nodes: 2\nranks_per_node: 2\n"
        "intra: {kind: analytic, alpha_s: 1.0e-4, beta_s_per_byte: 1.0e-7, algorithm: ring}\n"
        "inter: {kind: analytic, alpha_s: 1.0e-4, beta_s_per_byte: 1.0e-7, algorithm: ring}\n",
        encoding="utf-8")
    _scaled_copy(REPO / "traces/comm/external/nccl-abci-intra-anode-8", d / "intra8", 1.25)
    _scaled_copy(REPO / "traces/comm/cpu/gloo-tbf1gbit-p2", d / "mip", 1.25, in_place=True)
    entry = ("version: 1\nfiles:\n  - file: nccl-tests/abci-intra-vnode-4.txt\n"
             "    importer: nccl-tests\n    out: comm/nccl.csv\n    args: {interconnect: %s}\n")
    (d / "manifest.yaml").write_text(entry % "NVLink2", encoding="utf-8")
    (d / "manifest2.yaml").write_text(entry % "PCIe", encoding="utf-8")
    (d / "external/nccl-tests").mkdir(parents=True)
    shutil.copyfile(REPO / "data/external/nccl-tests/abci-intra-anode-4.txt",
                    d / "external/nccl-tests/abci-intra-vnode-4.txt")
    _gradsched(f"plan --compute {C} --comm {M} --algorithm ddp -o {{d}}/plan.json", d)
    for algorithm in ("fsdp2", "zero3"):
        _gradsched(f"shard plan --compute {C} --comm {M} --world-size 2 --algorithm "
                   f"{algorithm} -o {{d}}/{algorithm}.json", d)
    from gradsched.plan import Bucket, Plan

    tiny = [f"{layer}.{kind}" for layer in (4, 2, 0) for kind in ("bias", "weight")]
    Plan("wfbp", tuple(Bucket((name,)) for name in tiny)).save(d / "tiny.plan.json")
    for name, iters, ranks in (("reexec", 3, 2), ("reexec2", 4, 2),
                               ("reexec-many", 3, TOO_MANY)):
        (d / f"{name}.yaml").write_text(
            "reexec:\n  settings: {algorithms: [wfbp], ddp_bucket_cap_mb: [default], "
            f"warmup: 1, iters: {iters}, rounds: 1, threads: 1, backend: gloo, seed: 0, "
            "timeout_s: 60, replay_iterations: 2}\n  cases:\n"
            f"    - {{model: resnet18, batch_size: 4, world_size: {ranks}, "
            f"network: tbf1gbit, compute: {d}/c.csv, comm: {d}/m.csv}}\n"
            f"    - {{model: resnet18, batch_size: 16, world_size: 2, network: tbf1gbit, "
            f"compute: {d}/c16.csv, comm: {d}/m.csv}}\n", encoding="utf-8")
    _reexec_inputs(d)
    _report_inputs(d)
    _at_scale_inputs(d)
    _gradsched(f"{NCROSS} -o {{d}}/nccl.json", d)  # an nccl model (shard mesh --comm)


def _at_scale_inputs(d: Path) -> None:
    """Two sources of the committed at-scale points (H100 only), and the study's outputs
    on each (for ``report at-scale``)."""
    points = REPO / "data/external/at-scale/points.csv"
    _subset(points, d / "points-tt.csv", ("torchtitan",))
    _subset(points, d / "points-mx.csv", ("dgxc-maxtext",))
    for name in ("tt", "mx"):
        _gradsched(f"study at-scale --points {{d}}/points-{name}.csv --comm h100={AS_AB} "
                   f"-o {{d}}/as-{name}.csv --summary-output {{d}}/as-{name}.json "
                   f"--decompose-out {{d}}/dec-{name}.csv", d)
    # the torchtitan study's summary relabelled as each variant the record keeps (synthetic:
    # the four share one set of numbers; for report at-scale-variants --record)
    summary = json.loads((d / "as-tt.json").read_text(encoding="utf-8"))
    for variant in SWITCH_VARIANTS.values():
        (d / f"as-v-{variant}.json").write_text(json.dumps(summary | {"variant": variant}),
                                                encoding="utf-8")
    # synthetic per-unit jitter and stragglers tables (columns as gradsched study unit-jitter
    # and study stragglers write them; the numbers are made up)
    for name, cv in (("unit-jitter", 0.3), ("unit-jitter2", 0.2)):
        (d / f"{name}.csv").write_text(
            "role,trace,measured,independent_cv,fit_cv,error_pct\n"
            f"fit,synthetic,True,{cv},{cv},\nvalidation,synthetic,True,0.4,{cv},"
            f"{100 * (cv / 0.4 - 1):.1f}\n", encoding="utf-8")
    for name, cv in (("stragglers", 0.03), ("stragglers2", 0.05)):
        (d / f"{name}.csv").write_text(
            "kind,source,device_class,samples,cv,predicted_wait_pct,observed_wait_pct,"
            f"error_pct\nfit,synthetic,gpu-bound,2 configs,{cv},,,\nvalidation,synthetic,"
            f"gpu-bound,8 ranks,{cv},{cv * 142:.2f},40,{cv * 142 / 0.4 - 100:.1f}\n",
            encoding="utf-8")
    # the two studies' points in one file, and (synthetic) the same with every published
    # step 10 % longer (for report at-scale-decompose --points)
    for name, scale in (("as-all", 1.0), ("as-all2", 1.1)):
        with (d / f"{name}.csv").open("w", encoding="utf-8", newline="") as dst:
            writer = None
            for study in ("tt", "mx"):
                with (d / f"as-{study}.csv").open(encoding="utf-8", newline="") as src:
                    reader = csv.DictReader(src)
                    if writer is None:
                        writer = csv.DictWriter(dst, fieldnames=reader.fieldnames or [])
                        writer.writeheader()
                    for line in reader:
                        step = scale * float(line["published_step_s"])
                        writer.writerow({**line, "published_step_s": step})
    model = json.loads((REPO / "src/gradsched/costmodel/overlap_slowdown.json").read_text(
        encoding="utf-8"))
    model["generations"]["A100"]["slowdown"] = 1.2
    (d / "overlap2.json").write_text(json.dumps(model), encoding="utf-8")


def _subset(source: Path, target: Path, cases: tuple[str, ...]) -> None:
    """The header and the rows of ``cases`` (first column) of a CSV."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    target.write_text("".join(lines[:1] + [x for x in lines[1:]
                                          if x.split(",", 1)[0] in cases]), encoding="utf-8")


def _reexec_inputs(d: Path) -> None:
    """One or two measured cases of the committed re-executions (paper/data), their
    folders with the traces named from anywhere."""
    for name in ("resnet18-b4-p2-tbf1gbit", "resnet18-b4-p2-loopback"):
        shutil.copytree(REPO / "paper/data/reexec/cases" / name, d / "cases" / name)
        meta = d / "cases" / name / "meta.json"
        doc = json.loads(meta.read_text(encoding="utf-8"))
        for key in ("compute", "comm"):
            doc["case"][key] = str(REPO / doc["case"][key])
        meta.write_text(json.dumps(doc), encoding="utf-8")
    for folder, one, two in (("reexec", "resnet18-b4-p2-tbf1gbit", "resnet18-b4-p2-loopback"),
                             ("reexec-accum", "resnet18-b4-p2-loopback",
                              "resnet18-b4-p2-loopback-k4")):
        for table in ("measured", "iterations"):
            source = REPO / "paper/data" / folder / f"{table}.csv"
            _subset(source, d / f"{folder}-{table}.csv", (one,))
            _subset(source, d / f"{folder}-{table}2.csv", (one, two))
    lines = (d / "reexec-accum-iterations.csv").read_text(encoding="utf-8").splitlines(True)
    rounds = lines[0].split(",").index("round")  # the first two rounds only
    (d / "reexec-accum-iterations3.csv").write_text("".join(
        lines[:1] + [x for x in lines[1:] if x.split(",")[rounds] in ("0", "1")]),
        encoding="utf-8")


def _report_inputs(d: Path) -> None:
    """Result files of the kinds the report verbs read, made by gradsched from the
    committed traces (and SYNTHETIC advice JSONs: tests/report/test_llm_scale.py's)."""
    from tests.report.test_llm_scale import DDP, FITS, NONE

    algorithms = "--algorithms wfbp,ddp,mgwfbp,contiguous_optimum,search,best --replay-iters 2"
    bc = "{R}/traces/compute/bcaffe/googlenet-tmp4ocomm.csv"
    bc_comm = "{R}/traces/comm/external/bcaffe-googlenet-tmp4ocomm.csv"
    for line in (
        f"replay --compute {C} --comm {M} {algorithms} -o {{d}}/res.csv --timeline {{d}}/tl",
        f"replay --compute {C} --comm {{d}}/m4.csv {algorithms} -o {{d}}/res4.csv",
        f"replay --compute {C} --comm {M} --algorithms wfbp,search --issue executor "
        "--replay-iters 2 -o {d}/res-ex.csv",
        f"replay --compute {bc} --comm {bc_comm} --algorithms wfbp,mgwfbp -o {{d}}/bc.csv",
        f"replay --compute {bc} --comm {bc_comm} --algorithms wfbp,mgwfbp --forward-ratio 0 "
        "-o {d}/bc0.csv",
        f"report collect --case rn18 tbf1gbit {M} {{d}}/res.csv --case rn18 tbf1gbit "
        "{d}/m4.csv {d}/res4.csv -o {d}/collected.csv",
        f"fit {M} {{d}}/m4.csv --model all --table {{d}}/fits.csv",
        f"fit {M} -o {{d}}/m.piecewise.json",
        f"{CROSS} --table {{d}}/crossws.csv",
        f"report compare --nccl {EXT_DATA}/nccl-tests/abci-intra-vnode-4.txt "
        f"{{R}}/traces/comm/external/nccl-abci-intra-vnode-4.csv --bcaffe "
        f"{EXT_DATA}/bcaffe-googlenet/tmp4ocomm.log {{d}}/bc.csv tmp4ocomm -o {{d}}/compare.csv",
        f"{ST_TR} --measured two {{d}}/m4.csv".replace("-o s.csv", "-o {d}/topo.csv"),
        ST_PS.replace("-o s.csv", "-o {d}/ps.csv"),
        ST_HC.replace("-o s.csv", "-o {d}/hc.csv"),
        ST_SC.replace("-o s.csv", "-o {d}/sc.csv"),
        ST_SH.replace("-o s.csv", "-o {d}/sh.csv"),
        f"traces inventory {C} {M} -o {{d}}/inventory.csv",
        "reexec analyze --input {R}/paper/data/reexec/measured.csv --stats {d}/stats.csv",
        f"fit {M} --model all --table {{d}}/fits2.csv",
        f"report collect --case rn18 tbf1gbit {M} {{d}}/res.csv --case rn18 tbf1gbit "
        "{d}/m4.csv {d}/res4.csv --label rn18 tbf1gbit h200 real -o {d}/collected2.csv",
        f"report collect --case rn18 tbf1gbit {M} {{d}}/res.csv --case rn18 slow "
        f"{{d}}/m4.csv {{d}}/res4.csv --case rn16 tbf1gbit {M} {{d}}/res-ex.csv "
        "-o {d}/collected3.csv",
        ST_TR.replace("-o s.csv", "-o {d}/topo2.csv"),
        ST_PS.replace("-o s.csv", "--layout 2:colocated -o {d}/ps2.csv"),
        ST_HC.replace("-o s.csv", "-o {d}/hc2.csv").replace(
            "{R}/data/h200/kineto-steps/kineto-steps-summary.json", "{d}/summary.json"),
        ST_SC.replace("-o s.csv", "-o {d}/sc2.csv").replace("scaling.yaml", "scaling2.yaml"),
        ST_SH.replace("-o s.csv", "-o {d}/sh2.csv").replace("blocking", "streams"),
        ST_OV.replace("m.json", "{d}/ovm.json").replace("-o s.csv", "-o {d}/ov.csv"),
        ST_OV.replace("m.json", "{d}/ovm2.json").replace("-o s.csv", "-o {d}/ov2.csv")
        .replace("fit all", "fit first-half"),
        "report macros --fits {d}/fits.csv -o {d}/macros.tex",
        f"bench collectives-fit {COLL}/loopback-p2.csv {COLL}/loopback-p3.csv "
        "-o {d}/cfit.json --errors {d}/cerr.csv",
        f"bench collectives-fit {COLL}/loopback-p2.csv -o {{d}}/cfit2.json "
        "--errors {d}/cerr2.csv",
        "report macros --replay {d}/collected.csv -o {d}/macros2.tex",
        SHD.replace("-o sd.csv", "-o {d}/sdt.csv"),
        SHD.replace(M, AB).replace("-o sd.csv", "-o {d}/sdt2.csv"),
    ):
        _gradsched(line, d)
    ddp2 = json.loads(json.dumps(DDP))
    ddp2["plan"]["iteration_s"] = 20.0
    arch = (REPO / "paper/data/reexec/architectures/measured.json").read_text(encoding="utf-8")
    runs = json.loads(arch)
    runs["measured"] = runs["measured"][:-1]  # one measurement less
    (d / "arch.json").write_text(json.dumps(runs), encoding="utf-8")
    for name, advice in (("ddp", DDP), ("ddp2", ddp2), ("fits", FITS), ("none", NONE)):
        (d / f"advice-{name}.json").write_text(json.dumps(advice), encoding="utf-8")
    shutil.copytree(REPO / "paper/data/compression", d / "compression")
    summary = d / "compression/summary.csv"
    lines = summary.read_text(encoding="utf-8").splitlines(keepends=True)
    summary.write_text("".join(lines[:-1]), encoding="utf-8")  # one row less
    for name in ("main", "other"):
        (d / f"{name}.log").write_text("clean\n", encoding="utf-8")
    (d / "main.tex").write_text(
        "\\begin{figure}\\includegraphics{figures/fit-mape}\\caption{Held-out error.}"
        "\\label{fig:fit-mape}\\end{figure}\n", encoding="utf-8")


def _scaled_copy(source: Path, target: Path, factor: float, in_place: bool = False) -> None:
    """A comm trace (and its sidecar) with every time multiplied by ``factor``; with
    ``in_place``, the out-of-place rows kept and the scaled ones added as in-place rows."""
    shutil.copyfile(source.with_suffix(".meta.json"), target.with_suffix(".meta.json"))
    lines = source.with_suffix(".csv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    place = header.index("in_place")
    times = [i for i, name in enumerate(header) if name.startswith("time_")]
    rows = []
    added: list[str] = []  # a series' in-place rows follow its out-of-place ones
    for k, line in enumerate(lines[1:], 1):
        cells = line.split(",")
        if in_place:
            rows.append(line)
        if not in_place or cells[place] == "0":
            for i in times:
                cells[i] = repr(float(cells[i]) * factor)
            if in_place:
                cells[place] = "1"
            (added if in_place else rows).append(",".join(cells))
        following = lines[k + 1].split(",") if k + 1 < len(lines) else None
        if added and (following is None or following[0] != cells[0]):
            rows += added
            added = []
    target.with_suffix(".csv").write_text("\n".join([lines[0], *rows]) + "\n",
                                          encoding="utf-8")


def _kineto_inputs(d: Path) -> None:
    """SYNTHETIC profiler traces (hand-written, not measured): ``gpu.json``, the GPU
    training trace of ``tests/traces/importers/test_kineto_gpu.py`` with a second step
    (kernels twice as long) inside a ``gs:iteration#1`` range, its parameter tables, and
    ``cpu.json``, two steps with a gloo all-reduce span that ends after its step."""
    import copy

    from tests.traces.importers.test_kineto_gpu import synthetic_trace

    doc = synthetic_trace()
    second = copy.deepcopy(doc["traceEvents"])
    for ev in second:
        ev["ts"] += 1000
        if ev["name"].startswith("ProfilerStep"):
            ev["name"] = "ProfilerStep#4"
        elif ev["cat"] == "kernel":
            ev["dur"] *= 2
        if "correlation" in ev["args"]:
            ev["args"]["correlation"] += 10_000
    doc["traceEvents"] = [*doc["traceEvents"], *second, {
        "ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "name": "gs:iteration#1",
        "ts": 1000, "dur": 1000, "args": {}}]
    (d / "gpu.json").write_text(json.dumps(doc), encoding="utf-8")
    (d / "gpu1.json").write_text(json.dumps(synthetic_trace()), encoding="utf-8")
    for name, prefix in (("params", "fc"), ("params2", "layer")):
        (d / f"{name}.csv").write_text(f"name,numel\n{prefix}1.weight,100\n{prefix}1.bias,10\n"
                                       f"{prefix}2.weight,50\n", encoding="utf-8")
    meta = {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
            "Group size": 2, "dtype": "Float"}

    def x(name: str, ts: int, dur: int, cat: str = "cpu_op", tid: int = 1, **args: object
          ) -> dict[str, object]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts,
                "dur": dur, "args": args}

    events = [x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
              x("ProfilerStep#2", 1000, 1000, cat="user_annotation"),
              x("aten::mm", 10, 300), x("aten::mm", 1010, 600),
              x("record_param_comms", 800, 500, tid=5, **meta),
              x("record_param_comms", 1700, 200, tid=5, **meta)]
    (d / "cpu.json").write_text(json.dumps({
        "traceEvents": events,
        "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2}}), encoding="utf-8")


def _gradsched(line: str, d: Path) -> None:
    """Make an input with gradsched itself (its printing silenced)."""
    import contextlib
    import io

    from gradsched.cli import main
    from tests.robustness.option_probes import argv_of

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv_of(line, d))
    if code != 0:
        raise RuntimeError(f"making a probe input failed: {line}")


# --------------------------------------------------------------------------- replay, plan

REPLAY = f"replay --compute {C} --comm {M} --algorithms wfbp,ddp --replay-iters 2 -o r.csv"
REPLAY_TOPO = REPLAY.replace(f"--comm {M}", "--topology {d}/topo.yaml")
REPLAY_HOST = (f"replay --compute {{R}}/traces/compute/h200-kineto/resnet50-b64-cuda-fp32.csv "
               f"--comm {AB} --world-size 8 --algorithms wfbp --host -o r.csv")
REPLAY_AB = REPLAY.replace(M, AB) + " --world-size 2"
GPU = "{R}/traces/compute/h200/gpt2-s1024-b8-cuda-bf16.csv"  # a GPU trace: auto applies
REPLAY_GPU = (f"replay --compute {GPU} --comm alpha-beta:alpha=1e-5,beta=1e-10 --world-size 8 "
              "--algorithms wfbp --replay-iters 2 -o r.csv")
PS = "servers=1,colocated=0,p2p=alpha-beta:alpha=1e-4,beta=1e-9"


def _replay() -> dict[str, Entry]:
    r = "replay "
    return {
        r + "--help": HELP,
        r + "--compute": Probe(REPLAY, REPLAY.replace(C, C16), "r.csv"),
        r + "--comm": Probe(REPLAY, REPLAY.replace(M, AB) + " --world-size 2", "r.csv"),
        r + "--topology": Probe(REPLAY, REPLAY_TOPO, "r.csv"),
        r + "--topology-collective": (
            refused(REPLAY, "--topology-collective flat"),
            more(REPLAY_TOPO, "--topology-collective flat", compare="r.csv")),
        r + "--ps": Probe(REPLAY, REPLAY.replace(f"--comm {M}", f"--ps {PS} --world-size 2"),
                          "r.csv"),
        r + "--world-size": Probe(REPLAY_AB, REPLAY_AB.replace("--world-size 2", "--world-size 8"),
                                  "r.csv"),
        r + "--knob": more(REPLAY, "--knob ddp.bucket_cap_mb=1", compare="r.csv"),
        r + "--forward-ratio": refused(REPLAY, "--forward-ratio 1"),
        r + "--grad-accum": (more(REPLAY, "--grad-accum 2", compare="r.csv"),
                             refused(REPLAY_HOST, "--grad-accum 2")),
        r + "--algorithms": Probe(REPLAY, REPLAY.replace("wfbp,ddp", "syncsgd"), "r.csv"),
        r + "--output": Output(REPLAY, REPLAY.replace("-o r.csv", "-o o.csv"), "o.csv"),
        r + "--timeline": Output(REPLAY, f"{REPLAY} --timeline tl", "tl"),
        r + "--plans": Output(REPLAY, f"{REPLAY} --plans pl", "pl"),
        # the steady state is reached in 2 iterations: more change the timeline only
        r + "--replay-iters": (more(f"{REPLAY} --timeline tl", "--replay-iters 3", compare="tl"),
                             refused(REPLAY_HOST, "--replay-iters 3")),
        r + "--channels": (more(REPLAY, "--channels 2", compare="r.csv"),
                           refused(REPLAY_HOST, "--channels 2")),
        r + "--pack-s-per-byte": more(REPLAY, "--pack-s-per-byte 1e-9", compare="r.csv"),
        # the host-aware replay (--host) models no interference: refused with it
        r + "--compute-slowdown": (more(REPLAY, "--compute-slowdown 2", compare="r.csv"),
                                   refused(REPLAY_HOST, "--compute-slowdown 2")),
        r + "--comm-slowdown": (more(REPLAY, "--comm-slowdown 2", compare="r.csv"),
                                refused(REPLAY_HOST, "--comm-slowdown 2")),
        r + "--collective-cpu-s": (more(REPLAY, "--collective-cpu-s 0.001", compare="r.csv"),
                                   refused(REPLAY_HOST, "--collective-cpu-s 0.001")),
        r + "--issue": more(f"{REPLAY} --channels 2", "--issue executor", compare="r.csv"),
        # auto: a GPU trace's generation's slowdown (off changes it), none on a CPU trace (a
        # number changes it); beside --compute-slowdown or --host, or below 1: refused
        r + "--overlap-slowdown": (
            more(REPLAY_GPU, "--overlap-slowdown off", compare="r.csv"),
            more(REPLAY, "--overlap-slowdown 2", compare="r.csv"),
            refused(f"{REPLAY} --compute-slowdown 2", "--overlap-slowdown 2"),
            refused(REPLAY_HOST, "--overlap-slowdown 2"),
            refused(REPLAY, "--overlap-slowdown 0.5")),
        r + "--interference": (more(REPLAY, "--interference {d}/inter.json", compare="r.csv"),
                               refused(REPLAY_HOST, "--interference {d}/inter.json")),
        r + "--host": refused(REPLAY, "--host"),
        # a CPU trace has no measured class: auto refused, a cv stretches its compute
        r + "--stragglers": (more(REPLAY, "--stragglers 0.05", compare="r.csv"),
                             refused(REPLAY, "--stragglers auto")),
        r + "--launch-queue": (refused(REPLAY, "--launch-queue 1"),
                               more(REPLAY_HOST, "--launch-queue 1", compare="r.csv")),
        r + "--collective-launch-s": (
            refused(REPLAY, "--collective-launch-s 0.001"),
            more(REPLAY_HOST, "--collective-launch-s 0.001", compare="r.csv")),
    }


PLAN = f"plan --compute {C} --comm {M} --algorithm ddp -o p.json"
PLAN_AB = PLAN.replace(M, AB) + " --world-size 2"
PLAN_MG = PLAN.replace("ddp", "mgwfbp")  # a plan that depends on the comm model


def _plan() -> dict[str, Entry]:
    p = "plan "
    return {
        p + "--help": HELP,
        p + "--compute": Probe(PLAN, PLAN.replace(C, C16), "p.json"),
        p + "--comm": Probe(PLAN_MG, PLAN_MG.replace(M, AB) + " --world-size 2", "p.json"),
        p + "--topology": Probe(PLAN_MG, PLAN_MG.replace(f"--comm {M}",
                                                         "--topology {d}/topo-slow.yaml"),
                                "p.json"),
        p + "--topology-collective": (
            refused(PLAN, "--topology-collective flat"),
            more(PLAN_MG.replace(f"--comm {M}", "--topology {d}/topo-slow.yaml"),
                 "--topology-collective flat", compare="p.json")),
        p + "--ps": Probe(PLAN_MG, PLAN_MG.replace(f"--comm {M}", f"--ps {PS} --world-size 2"),
                          "p.json"),
        p + "--world-size": Probe(PLAN_AB, PLAN_AB.replace("--world-size 2", "--world-size 8"),
                                  "p.json"),
        p + "--knob": more(PLAN, "--knob ddp.bucket_cap_mb=1", compare="p.json"),
        p + "--forward-ratio": refused(PLAN, "--forward-ratio 1"),
        p + "--grad-accum": more(PLAN, "--grad-accum 4", compare="p.json"),
        # the compute_slowdown knob of a planner that scores by replay (best); refused by
        # one that does not
        p + "--overlap-slowdown": (
            more(PLAN.replace("ddp", "best"), "--overlap-slowdown 3", compare="p.json"),
            refused(PLAN, "--overlap-slowdown 2")),
        p + "--algorithm": Probe(PLAN, PLAN.replace("ddp", "wfbp"), "p.json"),
        p + "--from": Probe(f"plan --compute {C} --algorithm wfbp --comm {M} --emit ddp",
                            f"plan --compute {C} --from {{d}}/plan.json --emit ddp", "stdout"),
        p + "--emit": more(PLAN, "--emit ddp"),
        p + "--output": Output(PLAN, PLAN.replace("-o p.json", "-o o.json"), "o.json"),
    }


# --------------------------------------------------------------------------- advise

ADV = f"advise --compute {C} --comm {M}"
ADV_AB = ADV.replace(M, AB) + " --world-size 2"
ADV_TOPO = ADV.replace(f"--comm {M}", "--topology {d}/topo.yaml")
ADV_SH = f"{ADV} --sharded"
ADV_SLOW = f"advise --compute {C} --comm alpha-beta:alpha=1e-3,beta=1e-8 --world-size 4"


def _advise() -> dict[str, Entry]:
    a = "advise "
    validate_only = {"--model": "resnet18", "--batch-size": "8", "--seq-len": "64",
                     "--rounds": "5", "--iters": "4", "--warmup": "1", "--threads": "2",
                     "--timeout-s": "60", "--cluster": "1gbit", "--oversubscribe": ""}
    entries: dict[str, Entry] = {
        a + "--help": HELP,
        a + "--compute": Probe(ADV, ADV.replace(C, C16), "stdout"),
        a + "--comm": Probe(ADV, ADV_AB, "stdout"),
        a + "--topology": Probe(ADV, ADV_TOPO, "stdout"),
        a + "--topology-collective": (refused(ADV, "--topology-collective flat"),
                                      more(ADV_TOPO, "--topology-collective flat")),
        a + "--world-size": Probe(ADV_AB, ADV_AB.replace("--world-size 2", "--world-size 8")),
        a + "--caps": more(ADV, "--caps 1,2"),
        a + "--current-bucket-cap-mb": more(ADV, "--current-bucket-cap-mb 1"),
        a + "--margin-pct": more(ADV, "--margin-pct 50"),
        a + "--interference": more(ADV, "--interference {d}/inter.json"),
        a + "--replay-iters": (more(ADV, "--replay-iters 3"), refused(ADV_SH, "--replay-iters 3")),
        a + "--forward-ratio": refused(ADV, "--forward-ratio 1"),
        a + "--plan-out": Output(ADV, f"{ADV} --plan-out pl.json", "pl.json"),
        a + "--json": Output(ADV, f"{ADV} --json a.json", "a.json"),
        a + "--stragglers": (more(ADV, "--stragglers 0.2"), more(ADV_SH, "--stragglers 0.2"),
                             refused(ADV, "--stragglers auto")),
        # printed in the commands of a recommended change (none is, on the 1 Gbit/s sweep)
        a + "--backend": (more(ADV_SLOW, "--backend nccl"), refused(ADV_SH, "--backend nccl")),
        a + "--grad-accum": more(ADV, "--grad-accum 2"),
        # DDP and --sharded (streams); refused beside --interference and where nothing
        # overlaps (--sharded on a CPU trace: blocking semantics)
        a + "--overlap-slowdown": (
            more(ADV_SLOW, "--overlap-slowdown 3"),
            more(f"{ADV_SH} --semantics streams", "--overlap-slowdown 3"),
            refused(f"{ADV} --interference {{d}}/inter.json", "--overlap-slowdown 2"),
            refused(ADV_SH, "--overlap-slowdown 2")),
        a + "--sharded": more(ADV, "--sharded"),
        a + "--semantics": (refused(ADV, "--semantics streams"),
                            more(ADV_SH, "--semantics streams")),
        a + "--memory-cap": (refused(ADV, "--memory-cap 20M"), more(ADV_SH, "--memory-cap 20M")),
        a + "--gpu-memory": (refused(ADV, "--gpu-memory 1G"), more(ADV_SH, "--gpu-memory 1G")),
        # the collectives' dtypes: FSDP2 settings, refused for DDP; float8 needs an LLM trace
        a + "--param-dtype": (refused(ADV, "--param-dtype bf16"),
                              more(ADV_SH, "--param-dtype bf16")),
        a + "--reduce-dtype": (refused(ADV, "--reduce-dtype bf16"),
                               more(ADV_SH, "--reduce-dtype bf16")),
        a + "--float8-all-gather": (refused(ADV, "--float8-all-gather"),
                                    refused(ADV_SH, "--float8-all-gather"),
                                    CoveredBy(F8_TEST, F8_WHY)),
        # device meshes on a two-level cluster; refused without --sharded or a cluster
        a + "--mesh": (Probe(ADV_SH, f"{ADV_TOPO} --sharded --mesh", "stdout"),
                       refused(ADV_TOPO, "--mesh"), refused(ADV_SH, "--mesh")),
    }
    for option, value in validate_only.items():
        entries[a + option] = refused(ADV, f"{option} {value}".strip())
    entries[a + "--oversubscribe"] = (entries[a + "--oversubscribe"], oversubscribed(
        f"{ADV_AB.replace('--world-size 2', f'--world-size {TOO_MANY}')} --validate",
        "gradsched.reexec.validate.validate"))
    return entries


# --------------------------------------------------------------------------- fit

FIT = f"fit {M}"
CROSS = f"fit {M} {{d}}/m3.csv {{d}}/m4.csv --cross-world-size --fit-on 2 --method analytic"
NCROSS = "fit {d}/a2.csv {d}/a4.csv --cross-world-size --fit-on 16"  # --method nccl


def _fit() -> dict[str, Entry]:
    f = "fit "
    return {
        f + "--help": HELP,
        f + "traces": Probe(FIT, "fit {d}/m4.csv", "stdout"),
        f + "--model": more(FIT, "--model alpha-beta", compare="stdout"),
        f + "--output": Output(FIT, f"{FIT} -o f.json", "f.json"),
        f + "--table": Output(FIT, f"{FIT} --table t.csv", "t.csv"),
        f + "--folds": more(FIT, "--folds 3", compare="stdout"),
        # mip.csv: an all_gather series measured both out of place and in place
        f + "--in-place": more("fit {d}/mip.csv", "--in-place", compare="stdout"),
        f + "--cross-world-size": Probe(f"fit {M} {{d}}/m3.csv {{d}}/m4.csv", CROSS, "stdout"),
        f + "--fit-on": (refused(FIT, "--fit-on 2"),
                         Probe(CROSS, CROSS.replace("--fit-on 2", "--fit-on 2,3"), "stdout")),
        f + "--algorithm": (refused(FIT, "--algorithm mst"),
                            more(CROSS, "--algorithm mst", compare="stdout")),
        f + "--from": (refused(FIT, "--from alpha-beta"),
                       more(CROSS, "--from alpha-beta", compare="stdout")),
        f + "--scale-by": (refused(FIT, "--scale-by nodes"),
                           more(CROSS, "--scale-by nodes", compare="stdout")),
        f + "--method": (refused(FIT, "--method scaled"),
                         more(CROSS, "--method scaled", compare="stdout")),
        f + "--gamma": (refused(FIT, "--gamma 1e-10"),
                        more(CROSS, "--gamma 1e-10", compare="stdout")),
        f + "--fabric": (refused(FIT, "--fabric none"), refused(CROSS, "--fabric none"),
                         more(NCROSS, "--fabric none", compare="stdout")),
        f + "--hardware": (refused(FIT, "--hardware abci-a100"),
                           refused(CROSS, "--hardware abci-a100"),
                           more(NCROSS, "--hardware h100-8x400g -o h.json", compare="all")),
    }


# --------------------------------------------------------------------------- shard

SHC = f"shard compare --compute {C} --comm {M} --world-size 2"
SHP = f"shard plan --compute {C} --comm {M} --world-size 2 --algorithm fsdp2 -o sp.json"
SHP_OPT = SHP.replace("fsdp2", "sharded-optimum")
SHD = f"shard dtypes --compute {C} --comm {M} --world-size 2 --label rn18 -o sd.csv"
F8_TEST = ("tests/commands/test_shard_dtypes.py::"
           "test_float8_all_gather_halves_the_all_gathers_of_an_llm")
F8_WHY = ("--float8-all-gather needs an LLM trace of gradsched traces flops, which the probes' "
          "committed inputs do not hold; the test makes one and shows the all-gathers shrink")


def _shard() -> dict[str, Entry]:
    entries: dict[str, Entry] = {"shard --help": HELP}
    for verb, base, compare in (("compare", SHC, "stdout"), ("plan", SHP_OPT, "all")):
        s = f"shard {verb} "
        entries.update({
            s + "--help": HELP,
            s + "--compute": Probe(base, base.replace(C, C16), compare),
            s + "--comm": Probe(base, base.replace(M, AB), compare),
            s + "--world-size": Probe(base.replace(M, AB), base.replace(M, AB).replace(
                "--world-size 2", "--world-size 4"), compare),
            s + "--semantics": more(base, "--semantics blocking", compare=compare),
            s + "--memory-cap": more(base, "--memory-cap 60M", compare=compare),
            s + "--gpu-memory": more(base, "--gpu-memory 1G", compare=compare),
            s + "--grad-accum": more(base, "--grad-accum 2", compare=compare),
            s + "--stragglers": (more(base, "--stragglers 0.2", compare=compare),
                                 refused(base, "--stragglers auto")),
            # parameters kept gathered between micro-batches: none to keep at k = 1
            s + "--keep-unsharded-between-microbatches": (
                more(f"{base} --grad-accum 2", "--keep-unsharded-between-microbatches",
                     compare=compare),
                refused(base, "--keep-unsharded-between-microbatches")),
            s + "--param-dtype": more(base, "--param-dtype bf16", compare=compare),
            s + "--reduce-dtype": more(base, "--reduce-dtype bf16", compare=compare),
            # float8 needs an LLM trace (its names say which tensors are linear weights)
            s + "--float8-all-gather": (refused(base, "--float8-all-gather"),
                                        CoveredBy(F8_TEST, F8_WHY)),
        })
    entries.update({
        "shard compare --plans-dir": Output(SHC, f"{SHC} --plans-dir pl", "pl"),
        "shard compare --output": Output(SHC, f"{SHC} -o sc.csv", "sc.csv"),
        "shard plan --algorithm": Probe(SHP, SHP.replace("fsdp2", "zero3")),
        # a memory budget bounds the optimum's search; the other planners take knobs
        "shard plan --memory-cap": (entries["shard plan --memory-cap"],
                                    refused(SHP, "--memory-cap 60M")),
        "shard plan --gpu-memory": (entries["shard plan --gpu-memory"],
                                    refused(SHP, "--gpu-memory 1G")),
        "shard plan --knob": more(SHP, "--knob forward_prefetch=2"),
        # blocking semantics: nothing overlaps a collective, a number would be ignored
        **{f"shard {verb} --overlap-slowdown": (
            more(base, "--overlap-slowdown 3", compare=compare),
            refused(f"{base} --semantics blocking", "--overlap-slowdown 2"))
           for verb, base, compare in (("compare", SHC, "stdout"), ("plan", SHP_OPT, "all"))},
        "shard plan --output": Output(SHP, SHP.replace("-o sp.json", "-o o.json"), "o.json"),
        "shard dtypes --help": HELP,
        "shard dtypes --compute": Probe(SHD, SHD.replace(C, C16), "sd.csv"),
        "shard dtypes --comm": Probe(SHD, SHD.replace(M, AB), "sd.csv"),
        "shard dtypes --world-size": Probe(SHD.replace(M, AB), SHD.replace(M, AB).replace(
            "--world-size 2", "--world-size 4"), "sd.csv"),
        "shard dtypes --label": Probe(SHD, SHD.replace("--label rn18", "--label x"), "sd.csv"),
        "shard dtypes --output": Output(SHD, SHD.replace("-o sd.csv", "-o o.csv"), "o.csv"),
    })
    entries.update(_shard_mesh())
    return entries


SHM = f"shard mesh --compute {C} --topology {{d}}/topo.yaml -o m.csv"
SHMN = f"shard mesh --compute {C} --comm {{d}}/nccl.json --world-sizes 16 -o m.csv"


def _shard_mesh() -> dict[str, Entry]:
    """``shard mesh``: FSDP vs reshard-to-node vs HSDP (the nccl model: made from the ABCI
    sweeps, fitted at 16 ranks, in :func:`make_inputs`)."""
    s = "shard mesh "
    return {
        s + "--help": HELP,
        s + "--compute": Probe(SHM, SHM.replace(C, C16), "stdout"),
        s + "--topology": (Probe(SHM, SHM.replace("topo.yaml", "topo-slow.yaml"), "stdout"),
                           refused(SHMN, "--topology {d}/topo.yaml")),
        s + "--topology-collective": (more(SHM, "--topology-collective flat", compare="stdout"),
                                      refused(SHMN, "--topology-collective flat")),
        s + "--comm": Probe(SHM, SHMN, "stdout"),
        s + "--world-sizes": (Probe(SHMN, SHMN.replace("16", "32"), "stdout"),
                              refused(SHM, "--world-sizes 4")),
        s + "--semantics": more(SHM, "--semantics blocking", compare="stdout"),
        s + "--gpu-memory": more(SHM, "--gpu-memory 100M", compare="stdout"),
        s + "--output": Output(SHM, SHM.replace("-o m.csv", "-o o.csv"), "o.csv"),
        s + "--tex": (Output(SHM, f"{SHM} --tex t.tex --md t.md", "t.tex"),
                      refused(SHM, "--tex t.tex")),
        s + "--md": Output(SHM, f"{SHM} --tex t.tex --md t.md", "t.md"),
        s + "--macros": Output(SHM, f"{SHM} --macros mm.tex", "mm.tex"),
    }


# --------------------------------------------------------------------------- study

ST_SH = f"study sharded --case rn18 {C} tbf1gbit {M} 2 blocking -o s.csv"
AB_SLOW = "alpha-beta:alpha=1e-4,beta=1e-8"
ST_PS = (f"study ps-replay --case rn18 {C} tbf1gbit 2 {M} {{d}}/p2p.csv --layout 1:separate "
         "--replay-iters 2 -o s.csv")
EXT = "{R}/traces/comm/external"
ST_TC = (f"study topology-check --intra {EXT}/nccl-abci-intra-anode-8.csv "
         f"--sweep {EXT}/nccl-abci-inter-anode-2.csv {EXT}/nccl-abci-inter-anode-4.csv "
         "-o s.csv")
ST_TR = (f"study topology-replay --compute rn18 {C} --topology two {{d}}/topo.yaml flat "
         "--algorithms wfbp --replay-iters 2 -o s.csv")
ST_SC = "study scaling-check --spec {d}/scaling.yaml -o s.csv"
H200 = "{R}/traces/compute/h200-kineto"
ST_ST = "study stragglers --h200 {R}/data/h200 --traces {R}/traces/compute/h200 --dlrm " \
    "{R}/data/external/param/dlrm_kineto.tar.gz -o s.csv --ep e.csv --step-traces " \
    "{R}/data/external/kineto/worker0.1623143089861.pt.trace.json.gz"
ST_HC = (f"study host-check {H200}/resnet50-b64-cuda-fp32.csv --summary "
         "{R}/data/h200/kineto-steps/kineto-steps-summary.json -o s.csv")
ST_OV = ("study overlap-slowdown --source A100 fit all "
         "{R}/data/external/hta/nccl_parser_config/nccl_data.json.gz --model-out m.json "
         "-o s.csv")


AS_AB = "alpha-beta:alpha=2e-5,beta=4e-12"
ST_AS = f"study at-scale --points {{d}}/points-tt.csv --comm h100={AS_AB} -o s.csv"
UJ = "{R}/data/h200/kineto-steps"
ST_UJ = f"study unit-jitter --fit {UJ}/alexnet-b256-cuda-fp32.pt.trace.json.gz -o s.csv"


def _study() -> dict[str, Entry]:
    s = "study "
    return {
        "study --help": HELP,
        s + "at-scale --help": HELP,
        s + "at-scale --points": Probe(ST_AS, ST_AS.replace("points-tt", "points-mx"), "s.csv"),
        s + "at-scale --comm": Probe(ST_AS, ST_AS.replace("beta=4e-12", "beta=4e-11"), "s.csv"),
        s + "at-scale --overlap-slowdown": more(ST_AS, "--overlap-slowdown", compare="s.csv"),
        s + "at-scale --stragglers": more(ST_AS, "--stragglers", compare="s.csv"),
        s + "at-scale --variant": more(ST_AS, "--variant after", compare="s.csv"),
        s + "at-scale --output": Output(ST_AS, ST_AS.replace("-o s.csv", "-o o.csv"), "o.csv"),
        s + "at-scale --groups-out": Output(ST_AS, f"{ST_AS} --groups-out g.csv", "g.csv"),
        s + "at-scale --summary-output": Output(ST_AS, f"{ST_AS} --summary-output j.json",
                                                "j.json"),
        s + "at-scale --unit-jitter": more(ST_AS, "--unit-jitter {d}/unit-jitter.csv",
                                           compare="s.csv"),
        s + "at-scale --decompose-out": Output(ST_AS, f"{ST_AS} --decompose-out d.csv",
                                               "d.csv"),
        s + "at-scale --decompose-groups": more(f"{ST_AS} --decompose-out d.csv",
                                                "--decompose-groups compile", compare="d.csv"),
        s + "unit-jitter --help": HELP,
        s + "unit-jitter --fit": Probe(ST_UJ, ST_UJ.replace("alexnet-b256", "vgg16-b64"),
                                       "s.csv"),
        s + "unit-jitter --validate": more(ST_UJ, f"--validate {UJ}/vgg16-b64-cuda-fp32"
                                           ".pt.trace.json.gz", compare="s.csv"),
        s + "unit-jitter --chunk-s": more(ST_UJ, "--chunk-s 0.002", compare="s.csv"),
        s + "unit-jitter --output": Output(ST_UJ, ST_UJ.replace("-o s.csv", "-o o.csv"),
                                           "o.csv"),
        s + "ps-replay --help": HELP,
        s + "ps-replay --case": Probe(ST_PS, ST_PS.replace(" 2 ", " 4 ").replace(M, "{d}/m4.csv"),
                                      "s.csv"),
        s + "ps-replay --layout": more(ST_PS, "--layout 2:colocated", compare="s.csv"),
        # a parameter server on a slow link: the first iterations are a transient
        s + "ps-replay --replay-iters": more(
            f"study ps-replay --case rn18 {C} slow 2 {AB_SLOW} {AB_SLOW} --layout 1:separate "
            "--replay-iters 2 -o s.csv", "--replay-iters 3", compare="s.csv"),
        s + "ps-replay --output": Output(ST_PS, ST_PS.replace("-o s.csv", "-o o.csv"), "o.csv"),
        s + "topology-check --help": HELP,
        s + "topology-check --intra": Probe(ST_TC, ST_TC.replace(
            f"{EXT}/nccl-abci-intra-anode-8.csv", "{d}/intra8.csv"), "s.csv"),
        s + "topology-check --sweep": Probe(ST_TC, ST_TC.replace(
            f" {EXT}/nccl-abci-inter-anode-4.csv", ""), "s.csv"),
        s + "topology-check --output": Output(ST_TC, ST_TC.replace("-o s.csv", "-o o.csv"),
                                              "o.csv"),
        s + "topology-replay --help": HELP,
        s + "topology-replay --compute": Probe(ST_TR, ST_TR.replace(C, C16), "s.csv"),
        s + "topology-replay --topology": Probe(ST_TR, ST_TR.replace("flat", "hierarchical"),
                                                "s.csv"),
        s + "topology-replay --measured": more(ST_TR, "--measured two {d}/m4.csv",
                                               compare="s.csv"),
        s + "topology-replay --algorithms": Probe(ST_TR, ST_TR.replace("wfbp", "ddp"), "s.csv"),
        # auto: a GPU trace's generation's slowdown (off changes it); a CPU trace: a number
        s + "topology-replay --overlap-slowdown": (
            more(ST_TR, "--overlap-slowdown 3", compare="s.csv"),
            more(ST_TR.replace(f"rn18 {C}", "gpu {R}/traces/compute/h200/mobilenet_v2-b128-"
                               "cuda-fp32.csv").replace("wfbp", "ddp"),
                 "--overlap-slowdown off", compare="s.csv")),
        # Horovod's cycle on a slow cluster: the first iterations are a transient
        s + "topology-replay --replay-iters": more(
            ST_TR.replace("topo.yaml", "topo-slow.yaml").replace("wfbp", "horovod"),
            "--replay-iters 3", compare="s.csv"),
        s + "topology-replay --output": Output(ST_TR, ST_TR.replace("-o s.csv", "-o o.csv"),
                                               "o.csv"),
        s + "scaling-check --help": HELP,
        s + "scaling-check --spec": Probe(ST_SC, ST_SC.replace("scaling.yaml", "scaling2.yaml"),
                                          "s.csv"),
        # the published cases are GPU traces: auto applies their generation's slowdown
        s + "scaling-check --overlap-slowdown": more(ST_SC, "--overlap-slowdown off",
                                                     compare="s.csv"),
        s + "scaling-check --output": Output(ST_SC, ST_SC.replace("-o s.csv", "-o o.csv"),
                                             "o.csv"),
        s + "overlap-slowdown --help": HELP,
        s + "overlap-slowdown --source": (
            Probe(ST_OV, ST_OV.replace("fit all", "fit first-half"), "s.csv"),
            refused(ST_OV, "--source A100 test all {R}/data/external/hta/nccl_parser_config/"
                    "nccl_data.json.gz")),
        s + "overlap-slowdown --model-out": Output(
            ST_OV, ST_OV.replace("--model-out m.json", "--model-out n.json"), "n.json"),
        s + "overlap-slowdown --groups-out": Output(ST_OV, f"{ST_OV} --groups-out g.csv",
                                                    "g.csv"),
        s + "overlap-slowdown --output": Output(ST_OV, ST_OV.replace("-o s.csv", "-o o.csv"),
                                                "o.csv"),
        s + "host-check --help": HELP,
        s + "host-check traces": Probe(ST_HC, ST_HC.replace("resnet50-b64-cuda-fp32",
                                                            "vgg16-b64-cuda-fp32"), "s.csv"),
        s + "host-check --summary": Probe(ST_HC, ST_HC.replace(
            "{R}/data/h200/kineto-steps/kineto-steps-summary.json", "{d}/summary.json"),
            "s.csv"),
        s + "host-check --launch-queue": more(ST_HC, "--launch-queue 2", compare="s.csv"),
        s + "host-check --output": Output(ST_HC, ST_HC.replace("-o s.csv", "-o o.csv"),
                                          "o.csv"),
        # the study's inputs are whole folders of measurements: another folder is refused
        s + "stragglers --help": HELP,
        s + "stragglers --h200": Probe(ST_ST, ST_ST.replace("{R}/data/h200", "{d}"),
                                       expect="refused"),
        s + "stragglers --traces": Probe(ST_ST, ST_ST.replace(
            "{R}/traces/compute/h200", "{d}"), expect="refused"),
        s + "stragglers --dlrm": Probe(ST_ST, ST_ST.replace(
            "dlrm_kineto.tar.gz", "resnet_kineto.json.gz"), expect="refused"),
        s + "stragglers --step-traces": Probe(ST_ST, ST_ST.replace(
            "kineto/worker0.1623143089861.pt.trace.json.gz",
            "hta/nccl_parser_config/nccl_data.json.gz"), "s.csv"),
        s + "stragglers --output": Output(ST_ST, ST_ST.replace("-o s.csv", "-o o.csv"), "o.csv"),
        s + "stragglers --ep": Output(ST_ST, ST_ST.replace("--ep e.csv", "--ep o.csv"),
                                      "o.csv"),
        s + "stragglers --tables": Output(ST_ST, f"{ST_ST} --tables tb", "tb"),
        s + "sharded --help": HELP,
        s + "sharded --case": Probe(ST_SH, ST_SH.replace("blocking", "streams"), "s.csv"),
        s + "sharded --memory-cap": more(ST_SH, "--memory-cap 60M", compare="s.csv"),
        # blocking semantics: nothing overlaps, a number would be ignored
        s + "sharded --overlap-slowdown": (
            more(ST_SH.replace("blocking", "streams"), "--overlap-slowdown 3", compare="s.csv"),
            refused(ST_SH, "--overlap-slowdown 2")),
        s + "sharded --output": Output(ST_SH, ST_SH.replace("-o s.csv", "-o o.csv"), "o.csv"),
    }


# --------------------------------------------------------------------------- traces

H200C = "{R}/traces/compute/h200/bert-large-s128-b16-cuda-bf16.csv"
CORRECT = f"traces correct {H200C} -o t.csv"
FLOPS = "traces flops --model llama-2-70b -o t.csv"


def _traces() -> dict[str, Entry]:
    t = "traces "
    return {
        "traces --help": HELP,
        t + "validate --help": HELP,
        t + "validate paths": Probe(f"traces validate {C}", f"traces validate {M}", "stdout"),
        t + "columns --help": HELP,
        t + "inventory --help": HELP,
        t + "inventory paths": Probe(f"traces inventory {C} -o t.csv",
                                     f"traces inventory {C16} -o t.csv", "t.csv"),
        t + "inventory --output": Output(f"traces inventory {C} -o t.csv",
                                         f"traces inventory {C} -o o.csv", "o.csv"),
        t + "correct --help": HELP,
        t + "correct trace": Probe(CORRECT, CORRECT.replace("bf16.csv", "bf16-corrected.csv")),
        t + "correct --output": Output(CORRECT, CORRECT.replace("-o t.csv", "-o o.csv"), "o.csv"),
        t + "correct --hook-free-summary": more(
            CORRECT, "--hook-free-summary {R}/data/h200/kineto-steps/kineto-steps-summary.json"),
        t + "correct --gpu-busy": more(CORRECT, "--gpu-busy 0.32"),
        t + "correct --gpu-busy-source": (
            refused(CORRECT, "--gpu-busy-source nvidia-smi"),
            more(f"{CORRECT} --gpu-busy 0.32", "--gpu-busy-source nvidia-smi")),
        t + "flops --help": HELP,
        t + "flops --model": Probe(FLOPS, FLOPS.replace("llama-2-70b", "gpt3-175b"), "t.csv"),
        t + "flops --micro-batch": more(FLOPS, "--micro-batch 2", compare="t.csv"),
        t + "flops --seq-len": more(FLOPS, "--seq-len 1024", compare="t.csv"),
        t + "flops --gpu": more(FLOPS, "--gpu h100", compare="t.csv"),
        t + "flops --mfu": more(FLOPS, "--mfu 0.5", compare="t.csv"),
        t + "flops --dtype": more(FLOPS, "--dtype fp32", compare="t.csv"),
        t + "flops --output": Output(FLOPS, FLOPS.replace("-o t.csv", "-o o.csv"), "o.csv"),
        t + "flops --hf-config": (
            Probe(FLOPS, FLOPS.replace("--model llama-2-70b", "--hf-config llama-3.1-8b"),
                  "t.csv"),
            Probe(FLOPS, FLOPS.replace("--model llama-2-70b",
                                       "--hf-config {R}/data/external/hf-configs/qwen2.5-72b"),
                  "t.csv")),
        t + "flops --checkpointing": more(FLOPS, "--checkpointing none", compare="t.csv"),
    }


# --------------------------------------------------------------------------- import

EXT_DATA = "{R}/data/external"
NCCL = f"import nccl-tests {EXT_DATA}/nccl-tests/abci-intra-vnode-4.txt -o i.csv"
OSU = (f"import osu {EXT_DATA}/osu/abci-intra-anode-4-cpu.txt --world-size 4 --nodes 1 "
       "-o i.csv")
BCAFFE = f"import bcaffe {EXT_DATA}/bcaffe-googlenet/tmp2comm.log --world-size 2 -o i.csv"
BCAFFE_COMM = f"{BCAFFE} --nodes 2 --comm-out co.csv"
MANIFEST = f"import manifest {{d}}/manifest.yaml --src {EXT_DATA} -o out"
KINETO = "import kineto {d}/cpu.json -o k"
KGPU = "import kineto {d}/gpu.json --params {d}/params.csv --batch-size 2 --compute-out i.csv"
PIPEDREAM = (f"import pipedream {EXT_DATA}/pipedream/image_classification/resnet18/graph.txt "
             "-o i.csv")
SAILOR = f"import sailor {EXT_DATA}/sailor/profiles/OPT-350/A100-80/profile.json -o i.csv"


def _import() -> dict[str, Entry]:
    i = "import "
    entries: dict[str, Entry] = {"import --help": HELP}
    for verb, base in (("nccl-tests", NCCL), ("osu", OSU), ("bcaffe", BCAFFE_COMM)):
        entries.update({
            f"{i}{verb} --help": HELP,
            f"{i}{verb} --output": Output(base, base.replace("-o i.csv", "-o o.csv"), "o.csv"),
            f"{i}{verb} --source": more(base, "--source elsewhere"),
            f"{i}{verb} --hardware": more(base, "--hardware abacus"),
            f"{i}{verb} --interconnect": more(base, "--interconnect string"),
        })
    # the B-Caffe compute trace records no node count, hardware or interconnect
    for option in ("--hardware abacus", "--interconnect string"):
        entries[f"{i}bcaffe {option.split()[0]}"] = (
            refused(BCAFFE, option), entries[f"{i}bcaffe {option.split()[0]}"])
    entries.update({
        i + "nccl-tests log": Probe(NCCL, NCCL.replace("intra-vnode-4", "intra-anode-4")),
        i + "nccl-tests --world-size": more(NCCL, "--world-size 8"),
        i + "nccl-tests --nodes": more(NCCL, "--nodes 2"),
        i + "nccl-tests --collective": more(NCCL, "--collective reduce_scatter"),
        i + "nccl-tests --backend": more(NCCL, "--backend rccl"),
        i + "nccl-tests --error-tolerance": more(NCCL, "--error-tolerance 1e-8"),
        i + "osu log": Probe(OSU, OSU.replace("intra-anode-4", "intra-vnode-4")),
        i + "osu --world-size": Probe(OSU, OSU.replace("--world-size 4", "--world-size 8")),
        i + "osu --nodes": Probe(OSU, OSU.replace("--nodes 1", "--nodes 2")),
        i + "osu --backend": more(OSU, "--backend gloo"),
        i + "osu --collective": more(OSU, "--collective broadcast"),
        i + "bcaffe log": Probe(BCAFFE, BCAFFE.replace("tmp2comm", "tmp4comm")),
        i + "bcaffe --comm-out": Output(BCAFFE, f"{BCAFFE} --nodes 2 --comm-out co.csv", "co.csv"),
        i + "bcaffe --world-size": Probe(BCAFFE, BCAFFE.replace("--world-size 2",
                                                                "--world-size 4")),
        i + "bcaffe --nodes": (refused(BCAFFE, "--nodes 2"), Probe(
            BCAFFE_COMM, BCAFFE_COMM.replace("--nodes 2", "--nodes 1"))),
        i + "bcaffe --model": more(BCAFFE, "--model inception"),
        i + "bcaffe --batch-size": more(BCAFFE, "--batch-size 32"),
        i + "bcaffe --device": more(BCAFFE, "--device V100"),
        i + "manifest --help": HELP,
        i + "manifest manifest": Probe(MANIFEST, MANIFEST.replace("manifest.yaml",
                                                                   "manifest2.yaml")),
        i + "manifest --src": Probe(MANIFEST, MANIFEST.replace(EXT_DATA, "{d}/external")),
        i + "manifest --output": Output(MANIFEST, MANIFEST.replace("-o out", "-o o"), "o"),
        i + "kineto --help": HELP,
        i + "kineto traces": Probe(KGPU, KGPU.replace("gpu.json", "gpu1.json")),
        i + "kineto --output": Output(KINETO, KINETO.replace("-o k", "-o o"),
                                      "o.iterations.csv"),
        i + "kineto --no-clip": (more(KINETO, "--no-clip"), refused(KGPU, "--no-clip")),
        i + "kineto --compute-out": Output(KGPU, KGPU.replace("i.csv", "o.csv"), "o.csv"),
        i + "kineto --comm-out": (Output(KGPU, f"{KGPU} --comm-out co.csv", "co.csv"),
                                  refused(KINETO, "--comm-out co.csv")),
        i + "kineto --step": (more(KGPU, "--step 4"), more(KINETO, "--step 2")),
        i + "kineto --step-range": (more(KGPU, "--step-range gs:iteration"),
                                    refused(KINETO, "--step-range gs:iteration")),
        # the GPU trace holds rank 0 only
        i + "kineto --rank": (refused(KGPU, "--rank 1"), refused(KINETO, "--rank 0")),
        i + "kineto --params": Probe(KGPU, KGPU.replace("params.csv", "params2.csv")),
        i + "kineto --model": (more(KGPU, "--model mlp"), refused(KINETO, "--model mlp")),
        i + "kineto --batch-size": (Probe(KGPU, KGPU.replace("--batch-size 2", "--batch-size 3")),
                                    refused(KINETO, "--batch-size 3")),
        i + "kineto --world-size": (more(KGPU, "--world-size 8"),
                                    refused(KINETO, "--world-size 8")),
        i + "kineto --device": (more(KGPU, "--device abacus"), refused(KINETO, "--device x")),
        i + "kineto --source": (more(KGPU, "--source elsewhere"),
                                refused(KINETO, "--source elsewhere")),
        i + "kineto --host": (more(KGPU, "--host"), refused(KINETO, "--host")),
        i + "pipedream --help": HELP,
        i + "pipedream graph": Probe(PIPEDREAM, PIPEDREAM.replace("resnet18", "alexnet")),
        i + "pipedream --output": Output(PIPEDREAM, PIPEDREAM.replace("-o i.csv", "-o o.csv"),
                                         "o.csv"),
        i + "pipedream --model": more(PIPEDREAM, "--model rn18"),
        i + "pipedream --image-size": more(PIPEDREAM, "--image-size 112"),
        # the activation sizes imply the batch: a contradicting one is refused
        i + "pipedream --batch-size": refused(PIPEDREAM, "--batch-size 32"),
        i + "pipedream --source": more(PIPEDREAM, "--source elsewhere"),
        i + "sailor --help": HELP,
        i + "sailor profile": Probe(SAILOR, SAILOR.replace("A100-80", "V100-16")),
        i + "sailor --output": Output(SAILOR, SAILOR.replace("-o i.csv", "-o o.csv"), "o.csv"),
        # the model names the layer table; an unknown one is refused
        i + "sailor --model": refused(SAILOR, "--model OPT-350m"),
        i + "sailor --micro-batch": more(SAILOR, "--micro-batch 2"),
        i + "sailor --tensor-parallel": more(SAILOR, "--tensor-parallel 2"),
        i + "sailor --seq-len": more(SAILOR, "--seq-len 1024"),
        i + "sailor --source": more(SAILOR, "--source elsewhere"),
    })
    return entries


# --------------------------------------------------------------------------- report

COLLECT = f"report collect --case rn18 tbf1gbit {M} {{d}}/res.csv -o c.csv"
FIG = "report figure"
FITCURVES = f"{FIG} fit-curves --comm {M} -o f.pdf"
FITMAPE = f"{FIG} fit-mape --fits {{d}}/fits.csv -o f.pdf"
RVW = f"{FIG} replay-vs-world-size --input {{d}}/collected.csv -o f.pdf"
TIMELINE = f"{FIG} timeline --input {{d}}/tl/wfbp.timeline.csv -o f.pdf"
GENERATIONS = f"{FIG} gpu-generations --input {{d}}/collected.csv -o f.pdf"
GAPS = f"{FIG} gaps --input {{d}}/collected.csv -o f.pdf"
TABLE = "report table fits --input {d}/fits.csv --tex t.tex --md t.md"
FORWARD = "report forward --run 0.5 {d}/bc.csv --tex t.tex --md t.md"
HEADLINE = "report headline-models --run piecewise {d}/res.csv --tex t.tex --md t.md"
LLM = ("report llm-scale --model a --advice {d}/advice-ddp.json --sharded "
       "{d}/advice-fits.json --tex t.tex --md t.md")
MACROS = "report macros -o m.tex"
AS_VARIANTS = "report at-scale-variants --summary {d}/as-tt.json --tex t.tex --md t.md"
AS_RECORD = ("report at-scale-variants --summary "
             + " ".join(f"{{d}}/as-v-{v}.json" for v in SWITCH_VARIANTS.values())
             + " --tex t.tex --md t.md")
AS_EFFECTS = ("report at-scale-effects --overlap-model "
              "{R}/src/gradsched/costmodel/overlap_slowdown.json --stragglers "
              "{d}/stragglers.csv --unit-jitter {d}/unit-jitter.csv --tex t.tex --md t.md")
AS_REPORT = ("report at-scale --input {d}/as-tt.csv --summary {d}/as-tt.json --tex t.tex "
             "--md t.md --macros m.tex")
AS_DEC = ("report at-scale-decompose --input {d}/dec-tt.csv --points {d}/as-all.csv "
          "--tex t.tex --md t.md --macros m.tex")
COMPARE = "report compare --skip nccl-busbw x no-log -o c.csv"
PAPER = "{R}/paper/data"
TABLE_VERBS = {  # verb: (its input, another input of the same kind)
    "topology-replay-table": ("{d}/topo.csv", "{d}/topo2.csv"),
    "architectures": (f"{PAPER}/reexec/architectures/measured.json", "{d}/arch.json"),
    "ps-replay-table": ("{d}/ps.csv", "{d}/ps2.csv"),
    "host-check-table": ("{d}/hc.csv", "{d}/hc2.csv"),
    "scaling-table": ("{d}/sc.csv", "{d}/sc2.csv"),
    "sharded-table": ("{d}/sh.csv", "{d}/sh2.csv"),
    "sharded-dtypes-table": ("{d}/sdt.csv", "{d}/sdt2.csv"),
    "overlap-slowdown-table": ("{d}/ov.csv", "{d}/ov2.csv"),
    "sharded-measured-table": (f"{PAPER}/sharded/resnet18-b4-p2-tbf1gbit/measured.csv",
                               f"{PAPER}/sharded/mobilenet_v2-b8-p2-tbf1gbit/measured.csv"),
}
MACRO_INPUTS = {  # option: its value (the report verbs' inputs)
    "--fits": "{d}/fits.csv",
    "--crossws": "{d}/crossws.csv",
    "--replay": "{d}/collected.csv",
    "--compare": "{d}/compare.csv",
    "--reexec": f"{PAPER}/reexec/measured.csv",
    "--architectures": f"{PAPER}/reexec/architectures/measured.json",
    "--reexec-stats": "{d}/stats.csv",
    "--executor-bench": f"{PAPER}/reexec/bench-executor-vs-ddp.json",
    "--gpu-kineto": "{R}/data/h200/kineto-import-report.csv",
    "--gpu-corrections": "{R}/data/h200/correction-report.csv",
    "--gpu-capture": "{R}/traces/compute/h200/bert-large-s128-b16-cuda-bf16.meta.json",
    "--burst-sweep": M,
    "--headline-model": "piecewise {d}/res.csv",
    "--calibrated-replay": "{d}/res.csv",
    "--captured": "{d}/inventory.csv",
    "--sharded-measured": f"{PAPER}/sharded/resnet18-b4-p2-tbf1gbit/measured.csv",
    "--host-check": "{d}/hc.csv",
}


def _report() -> dict[str, Entry]:
    r = "report "
    entries: dict[str, Entry] = {
        "report --help": HELP,
        r + "collect --help": HELP,
        r + "collect --case": Probe(COLLECT, COLLECT.replace("res.csv", "res-ex.csv")),
        r + "collect --extrapolated": more(COLLECT, f"--extrapolated rn18 x {M} {{d}}/res4.csv"),
        r + "collect --label": more(COLLECT, "--label rn18 tbf1gbit cpu real"),
        r + "collect --output": Output(COLLECT, COLLECT.replace("-o c.csv", "-o o.csv"), "o.csv"),
        r + "concat --help": HELP,
        r + "concat inputs": Probe("report concat {d}/res.csv -o c.csv",
                                   "report concat {d}/res.csv {d}/res4.csv -o c.csv"),
        r + "concat --output": Output("report concat {d}/res.csv -o c.csv",
                                      "report concat {d}/res.csv -o o.csv", "o.csv"),
        r + "figure --help": HELP,
        r + "table --help": HELP,
        r + "table name": Probe(TABLE, TABLE.replace("fits --input {d}/fits.csv",
                                                     "crossws --input {d}/crossws.csv")),
        r + "table --input": Probe(TABLE, TABLE.replace("fits.csv", "fits2.csv")),
        r + "table --tex": Output(TABLE, TABLE.replace("--tex t.tex", "--tex o.tex"), "o.tex"),
        r + "table --md": Output(TABLE, TABLE.replace("--md t.md", "--md o.md"), "o.md"),
        r + "table --title": more(TABLE, "--title Fits"),
        r + "table --family": (refused(TABLE, "--family cpu"), more(
            "report table replay --input {d}/collected.csv --tex t.tex --md t.md",
            "--family cpu")),
        r + "table --calibrated-link": (refused(TABLE, "--calibrated-link m"), more(
            "report table replay --input {d}/collected.csv --tex t.tex --md t.md",
            "--calibrated-link m")),
        r + "at-scale --help": HELP,
        r + "at-scale --input": Probe(AS_REPORT, AS_REPORT.replace("as-tt.csv", "as-mx.csv"),
                                      "t.tex"),
        r + "at-scale --summary": Probe(AS_REPORT, AS_REPORT.replace("as-tt.json", "as-mx.json"),
                                        "m.tex"),
        r + "at-scale --tex": Output(AS_REPORT, AS_REPORT.replace("--tex t.tex", "--tex o.tex"),
                                     "o.tex"),
        r + "at-scale --md": Output(AS_REPORT, AS_REPORT.replace("--md t.md", "--md o.md"),
                                    "o.md"),
        r + "at-scale --macros": Output(AS_REPORT, AS_REPORT.replace("--macros m.tex",
                                                                     "--macros o.tex"), "o.tex"),
        r + "at-scale-variants --help": HELP,
        r + "at-scale-variants --summary": Probe(AS_VARIANTS, AS_VARIANTS.replace(
            "as-tt.json", "as-mx.json"), "t.md"),
        r + "at-scale-variants --tex": Output(AS_VARIANTS, AS_VARIANTS.replace(
            "--tex t.tex", "--tex o.tex"), "o.tex"),
        r + "at-scale-variants --md": Output(AS_VARIANTS, AS_VARIANTS.replace(
            "--md t.md", "--md o.md"), "o.md"),
        r + "at-scale-variants --record": Output(AS_RECORD, AS_RECORD + " --record o.json",
                                                 "o.json"),
        r + "at-scale-effects --help": HELP,
        r + "at-scale-effects --overlap-model": Probe(AS_EFFECTS, AS_EFFECTS.replace(
            "{R}/src/gradsched/costmodel/overlap_slowdown.json", "{d}/overlap2.json"), "t.md"),
        r + "at-scale-effects --stragglers": Probe(AS_EFFECTS, AS_EFFECTS.replace(
            "stragglers.csv", "stragglers2.csv"), "t.md"),
        r + "at-scale-effects --unit-jitter": Probe(AS_EFFECTS, AS_EFFECTS.replace(
            "unit-jitter.csv", "unit-jitter2.csv"), "t.md"),
        r + "at-scale-effects --tex": Output(AS_EFFECTS, AS_EFFECTS.replace(
            "--tex t.tex", "--tex o.tex"), "o.tex"),
        r + "at-scale-effects --md": Output(AS_EFFECTS, AS_EFFECTS.replace(
            "--md t.md", "--md o.md"), "o.md"),
        r + "at-scale-decompose --help": HELP,
        r + "at-scale-decompose --input": Probe(AS_DEC, AS_DEC.replace("dec-tt", "dec-mx"),
                                                "t.md"),
        r + "at-scale-decompose --tex": Output(AS_DEC, AS_DEC.replace("--tex t.tex",
                                                                      "--tex o.tex"), "o.tex"),
        r + "at-scale-decompose --md": Output(AS_DEC, AS_DEC.replace("--md t.md", "--md o.md"),
                                              "o.md"),
        r + "at-scale-decompose --points": Probe(AS_DEC, AS_DEC.replace("as-all.csv",
                                                                        "as-all2.csv"), "m.tex"),
        r + "at-scale-decompose --macros": Output(AS_DEC, AS_DEC.replace(
            "--macros m.tex", "--macros o.tex"), "o.tex"),
        r + "llm-scale --help": HELP,
        r + "llm-scale --model": Probe(LLM, LLM.replace("--model a", "--model b")),
        r + "llm-scale --advice": Probe(LLM, LLM.replace("advice-ddp", "advice-ddp2")),
        r + "llm-scale --sharded": Probe(LLM, LLM.replace("advice-fits", "advice-none")),
        r + "llm-scale --tex": Output(LLM, LLM.replace("--tex t.tex", "--tex o.tex"), "o.tex"),
        r + "llm-scale --md": Output(LLM, LLM.replace("--md t.md", "--md o.md"), "o.md"),
        r + "llm-scale --title": more(LLM, "--title LLMs"),
        r + "latex-check --help": HELP,
        r + "latex-check log": Probe("report latex-check {d}/main.log",
                                     "report latex-check {d}/other.log", "stdout"),
        r + "claims --help": HELP,
        r + "claims --macros": Probe("report claims --macros {d}/macros.tex -o c.md",
                                     "report claims --macros {d}/macros2.tex -o c.md"),
        r + "claims --output": Output("report claims --macros {d}/macros.tex -o c.md",
                                      "report claims --macros {d}/macros.tex -o o.md", "o.md"),
        r + "captions --help": HELP,
        r + "captions main_tex": Probe("report captions {d}/main.tex -o caps",
                                       "report captions {R}/paper/main.tex -o caps"),
        r + "captions --output": Output("report captions {d}/main.tex -o caps",
                                        "report captions {d}/main.tex -o o", "o"),
        r + "overlap-slowdown-macros --help": HELP,
        r + "overlap-slowdown-macros --input": Probe(
            "report overlap-slowdown-macros --input {d}/ov.csv -o m.tex",
            "report overlap-slowdown-macros --input {d}/ov2.csv -o m.tex"),
        r + "overlap-slowdown-macros --output": Output(
            "report overlap-slowdown-macros --input {d}/ov.csv -o m.tex",
            "report overlap-slowdown-macros --input {d}/ov.csv -o o.tex", "o.tex"),
        r + "scaling-macros --help": HELP,
        r + "scaling-macros --input": Probe("report scaling-macros --input {d}/sc.csv -o m.tex",
                                            "report scaling-macros --input {d}/sc2.csv -o m.tex"),
        r + "scaling-macros --output": Output(
            "report scaling-macros --input {d}/sc.csv -o m.tex",
            "report scaling-macros --input {d}/sc.csv -o o.tex", "o.tex"),
        r + "compare --help": HELP,
        r + "compare --nccl": more(COMPARE, f"--nccl {EXT_DATA}/nccl-tests/abci-intra-vnode-4.txt "
                                   "{R}/traces/comm/external/nccl-abci-intra-vnode-4.csv"),
        r + "compare --bcaffe": more(COMPARE, f"--bcaffe {EXT_DATA}/bcaffe-googlenet/tmp4ocomm.log "
                                     "{d}/bc.csv tmp4ocomm"),
        r + "compare --skip": Probe(COMPARE, COMPARE.replace("no-log", "no-file")),
        r + "compare --output": Output(COMPARE, COMPARE.replace("-o c.csv", "-o o.csv"), "o.csv"),
        r + "macros --help": HELP,
        r + "macros --output": Output(MACROS, MACROS.replace("-o m.tex", "-o o.tex"), "o.tex"),
        r + "macros --headline-comm": (refused(MACROS, "--headline-comm m"),
                                       more(f"{MACROS} --fits {{d}}/fits.csv",
                                            "--headline-comm m")),
        r + "macros --headline-trace": (refused(MACROS, "--headline-trace rn16"), more(
            f"{MACROS} --replay {{d}}/collected3.csv", "--headline-trace rn16")),
        r + "macros --headline-network": (refused(MACROS, "--headline-network slow"), more(
            f"{MACROS} --replay {{d}}/collected3.csv", "--headline-network tbf1gbit")),
        r + "macros --headline-world-size": (refused(MACROS, "--headline-world-size 2"), more(
            f"{MACROS} --replay {{d}}/collected.csv", "--headline-world-size 2")),
        r + "macros --reexec-iterations": (
            refused(MACROS, f"--reexec-iterations {PAPER}/reexec/iterations.csv"),
            more(f"{MACROS} --reexec {PAPER}/reexec/measured.csv",
                 f"--reexec-iterations {PAPER}/reexec/iterations.csv")),
        # the traces and links the prose quotes; others are refused
        r + "macros --compute-trace": (
            more(MACROS, "--compute-trace {R}/traces/compute/cpu/resnet18-b4-cpu-fp32.csv"),
            refused(MACROS, f"--compute-trace {C16}")),
        r + "macros --sweep": (
            refused(MACROS, f"--sweep {M}"),
            more(f"{MACROS} --compute-trace {{R}}/traces/compute/cpu/resnet18-b4-cpu-fp32.csv",
                 f"--sweep {M}"),
            refused(f"{MACROS} --compute-trace {{R}}/traces/compute/cpu/resnet18-b4-cpu-fp32.csv",
                    "--sweep {R}/traces/comm/cpu/gloo-loopback-p2.csv")),
    }
    for option, value in MACRO_INPUTS.items():
        entries[f"{r}macros {option}"] = more(MACROS, f"{option} {value}")
    figures = {"fit-curves": FITCURVES, "fit-mape": FITMAPE, "replay-vs-world-size": RVW,
               "timeline": TIMELINE, "gpu-generations": GENERATIONS, "gaps": GAPS}
    for verb, base in figures.items():
        both = base.replace("-o f.pdf", "-o o.pdf --png o.png")  # one run, two outputs
        entries.update({
            f"{r}figure {verb} --help": HELP,
            f"{r}figure {verb} --output": Output(base, both, "o.pdf"),
            f"{r}figure {verb} --png": Output(base, both, "o.png"),
        })
    entries.update({
        r + "figure fit-curves --comm": Probe(FITCURVES, FITCURVES.replace(M, "{d}/m4.csv"),
                                              "f.pdf"),
        r + "figure fit-curves --models": more(FITCURVES, "--models {d}/m.piecewise.json",
                                               compare="f.pdf"),
        r + "figure fit-curves --fits": more(f"{FITCURVES} --models {{d}}/m.piecewise.json",
                                             "--fits {d}/fits.csv", compare="f.pdf"),
        r + "figure fit-mape --fits": Probe(FITMAPE, FITMAPE.replace("fits.csv", "fits2.csv"),
                                            "f.pdf"),
        r + "figure replay-vs-world-size --input": Probe(RVW, RVW.replace(
            "collected.csv", "collected2.csv"), "f.pdf"),
        r + "figure replay-vs-world-size --family": more(RVW, "--family cpu", compare="f.pdf"),
        r + "figure timeline --input": Probe(TIMELINE, TIMELINE.replace("wfbp", "mgwfbp"),
                                             "f.pdf"),
        r + "figure timeline --title": more(TIMELINE, "--title Timelines", compare="f.pdf"),
        r + "figure gpu-generations --input": Probe(GENERATIONS, GENERATIONS.replace(
            "collected.csv", "collected2.csv"), "f.pdf"),
        r + "figure gaps --input": Probe(GAPS, GAPS.replace("collected.csv", "collected3.csv"),
                                         "f.pdf"),
        # the probes' sweep is {d}/m.csv: link "m" (report/quote_rule.py link_of)
        r + "figure replay-vs-world-size --calibrated-link": more(RVW, "--calibrated-link m",
                                                                  compare="f.pdf"),
        r + "figure gpu-generations --calibrated-link": CoveredBy(
            "tests/report/test_quote_rule.py::test_the_figures_draw_the_rows_the_rule_leaves_out"
            "_differently", "the probes' GPU cases are left out for other reasons already"),
        r + "figure gaps --calibrated-link": more(GAPS, "--calibrated-link m", compare="f.pdf"),
        r + "forward --help": HELP,
        r + "forward --run": more(FORWARD, "--run 0 {d}/bc0.csv"),
        r + "forward --tex": Output(FORWARD, FORWARD.replace("--tex t.tex", "--tex o.tex"),
                                    "o.tex"),
        r + "forward --md": Output(FORWARD, FORWARD.replace("--md t.md", "--md o.md"), "o.md"),
        r + "forward --title": more(FORWARD, "--title Forward"),
        r + "headline-models --help": HELP,
        r + "headline-models --run": more(HEADLINE, "--run alpha-beta {d}/res4.csv"),
        r + "headline-models --tex": Output(HEADLINE, HEADLINE.replace("--tex t.tex",
                                                                       "--tex o.tex"), "o.tex"),
        r + "headline-models --md": Output(HEADLINE, HEADLINE.replace("--md t.md", "--md o.md"),
                                           "o.md"),
        r + "headline-models --title": more(HEADLINE, "--title Models"),
    })
    for verb, (first, other) in TABLE_VERBS.items():
        base = f"report {verb} --input {first} --tex t.tex --md t.md"
        entries.update({
            f"{r}{verb} --help": HELP,
            f"{r}{verb} --input": Probe(base, base.replace(first, other)),
            f"{r}{verb} --tex": Output(base, base.replace("--tex t.tex", "--tex o.tex"),
                                       "o.tex"),
            f"{r}{verb} --md": Output(base, base.replace("--md t.md", "--md o.md"), "o.md"),
            f"{r}{verb} --title": more(base, "--title Title"),
        })
    base = "report collectives-at-scale-table --case a {d}/cw.csv --tex t.tex --md t.md"
    verb = f"{r}collectives-at-scale-table"
    entries.update({
        f"{verb} --help": HELP,
        f"{verb} --case": Probe(base, base.replace("{d}/cw.csv", "{d}/cw2.csv")),
        f"{verb} --tex": Output(base, base.replace("--tex t.tex", "--tex o.tex"), "o.tex"),
        f"{verb} --md": Output(base, base.replace("--md t.md", "--md o.md"), "o.md"),
        f"{verb} --title": more(base, "--title Title"),
    })
    return entries


# --------------------------------------------------------------------------- reexec, bench

COLLECT_R = "reexec collect {d}/cases/resnet18-b4-p2-tbf1gbit -o m.csv"
COLLECT_ELSEWHERE = COLLECT_R.replace("-o m.csv",
                                      "-o o.csv --iterations-csv i.csv --provenance p.json")
ANALYZE = "reexec analyze --input {d}/reexec-measured.csv"
ANALYZE_IT = f"{ANALYZE} --iterations-csv {{d}}/reexec-iterations.csv"
ACCUM = ("reexec accum --input {d}/reexec-accum-measured.csv "
         "--iterations-csv {d}/reexec-accum-iterations.csv")
COLL = "{R}/traces/comm/collectives"
BFIT = f"bench collectives-fit {COLL}/loopback-p2.csv {COLL}/loopback-p3.csv -o f.json"
BTUNE = f"bench collectives-tune {COLL}/loopback-p2.csv -o t.json"
BREPORT = (f"bench collectives-report {COLL}/loopback-p2.csv --fit {{d}}/cfit.json "
           "--errors {d}/cerr.csv --figdir fig --tabdir tab")
ACCUM2 = ACCUM.replace("iterations.csv", "iterations2.csv")
BREPORT_ELSEWHERE = BREPORT.replace("--figdir fig --tabdir tab", "--figdir f2 --tabdir t2")
CREPORT = "compress report --input {R}/paper/data/compression --figdir fig --tabdir tab"
CREPORT_ELSEWHERE = CREPORT.replace("--figdir fig --tabdir tab", "--figdir f2 --tabdir t2")


def _reexec_bench() -> dict[str, Entry]:
    r = "reexec "
    entries: dict[str, Entry] = {
        r + "collect --help": HELP,
        r + "collect folders": Probe(COLLECT_R, COLLECT_R.replace("tbf1gbit", "loopback"),
                                     "m.csv"),
        r + "collect --interference": more(COLLECT_R, "--interference {d}/inter.json",
                                           compare="m.csv"),
        # one run writes every output, each at the path its option names
        r + "collect --iterations-csv": Output(COLLECT_R, COLLECT_ELSEWHERE, "i.csv"),
        r + "collect --provenance": Output(COLLECT_R, COLLECT_ELSEWHERE, "p.json"),
        r + "collect --output": Output(COLLECT_R, COLLECT_ELSEWHERE, "o.csv"),
        r + "analyze --help": HELP,
        r + "analyze --input": Probe(ANALYZE, ANALYZE.replace("measured.csv", "measured2.csv"),
                                     "stdout"),
        r + "analyze --iterations-csv": more(ANALYZE, "--iterations-csv {d}/reexec-iterations.csv",
                                         compare="stdout"),
        r + "accum --help": HELP,
        r + "accum --input": Probe(ACCUM2, ACCUM2.replace("measured.csv", "measured2.csv"),
                                   "stdout"),
        r + "accum --iterations-csv": Probe(ACCUM, ACCUM.replace("iterations.csv",
                                                             "iterations3.csv"), "stdout"),
    }
    # one run writes every output, each at the path its option names
    outputs = ("--stats", "--errors", "--table", "--md", "--figure", "--png", "--summary-table",
               "--summary-md", "--stock-ddp-tex", "--stock-ddp-md")
    every = " ".join(f"{option} out{option}" for option in outputs)
    for option in outputs:
        entries[f"{r}analyze {option}"] = Output(ANALYZE_IT, f"{ANALYZE_IT} {every}",
                                                 f"out{option}")
    outputs = ("--rows", "--summary", "--macros", "--tex", "--md", "--summary-tex",
               "--summary-md")
    every = " ".join(f"{option} out{option}" for option in outputs)
    for option in outputs:
        entries[f"{r}accum {option}"] = Output(ACCUM, f"{ACCUM} {every}", f"out{option}")
    for tex, md in (("--tex", "--md"), ("--summary-tex", "--summary-md")):
        for option in (tex, md):  # a table goes with its Markdown twin
            entries[f"{r}accum {option}"] = (refused(ACCUM, f"{option} out"),
                                             entries[f"{r}accum {option}"])
    b = "bench "
    entries.update({
        b + "collectives-fit --help": HELP,
        b + "collectives-fit traces": Probe(BFIT, BFIT.replace("loopback-p3", "loopback-p4"),
                                            "f.json"),
        b + "collectives-fit --time-column": more(BFIT, "--time-column time_min_s",
                                                  compare="f.json"),
        b + "collectives-fit --gamma": more(BFIT, "--gamma 0", compare="f.json"),
        b + "collectives-fit --output": Output(BFIT, BFIT.replace("-o f.json", "-o o.json"),
                                               "o.json"),
        b + "collectives-fit --errors": Output(BFIT, f"{BFIT} --errors e.csv", "e.csv"),
        b + "collectives-tune --help": HELP,
        b + "collectives-tune traces": Probe(BTUNE, BTUNE.replace("loopback-p2",
                                                                  "cluster-1gbit-p2"), "t.json"),
        b + "collectives-tune --source": more(BTUNE, "--source measured", compare="t.json"),
        b + "collectives-tune --fit": more(BTUNE, "--fit {d}/cfit.json", compare="t.json"),
        # the fit holds the loopback sweeps only: another network is refused
        b + "collectives-tune --network": refused(f"{BTUNE} --fit {{d}}/cfit.json",
                                                  "--network 1gbit"),
        b + "collectives-tune --candidates": more(BTUNE, "--candidates ring", compare="t.json"),
        b + "collectives-tune --time-column": more(BTUNE, "--time-column time_min_s",
                                                   compare="t.json"),
        b + "collectives-tune --output": Output(BTUNE, BTUNE.replace("-o t.json", "-o o.json"),
                                                "o.json"),
        b + "collectives-report --help": HELP,
        b + "collectives-report traces": Probe(BREPORT, BREPORT.replace(
            "loopback-p2.csv", "loopback-p2.csv {R}/traces/comm/collectives/loopback-p3.csv"),
            "tab"),
        b + "collectives-report --fit": Probe(BREPORT, BREPORT.replace("cfit", "cfit2"), "tab"),
        b + "collectives-report --errors": Probe(BREPORT, BREPORT.replace("cerr", "cerr2"),
                                                 "tab"),
        b + "collectives-report --figdir": Output(BREPORT, BREPORT_ELSEWHERE, "f2"),
        b + "collectives-report --tabdir": Output(BREPORT, BREPORT_ELSEWHERE, "t2"),
        b + "collectives-report --prefix": more(BREPORT, "--prefix coll", compare="tab"),
        "compress report --help": HELP,
        "compress report --input": Probe(CREPORT, CREPORT.replace(
            "{R}/paper/data/compression", "{d}/compression"), "tab"),
        "compress report --figdir": Output(CREPORT, CREPORT_ELSEWHERE, "f2"),
        "compress report --tabdir": Output(CREPORT, CREPORT_ELSEWHERE, "t2"),
        "--help": HELP,
        "--version": Exempt("argparse's --version: prints the version and exits 0"),
    })
    return entries


# --------------------------------------------------------------------------- slow commands
# Commands that start ranks, measure or need root: the probe stops each where it hands the
# work over (``reaches``), before any rank starts, and compares what it asked for.


def reach(base: str, extra: str, target: str) -> Probe:
    return Probe(base, f"{base} {extra}", reaches=target)


def stop_at(base: str, target: str, values: dict[str, str]) -> dict[str, Entry]:
    """``option: reach(...)`` for every ``option value`` of ``values``."""
    return {option: reach(base, f"{option} {value}".strip(), target)
            for option, value in values.items()}


RUN_ITEMS = "gradsched.runtime.bench.run_items"
RUN = "run --baseline ddp --model tiny-mlp --batch-size 4 --world-size 2 -o r.csv"
RUN_PLAN = "run --plan {d}/tiny.plan.json --model tiny-mlp --batch-size 4 --world-size 2 -o r.csv"
def _too_many() -> int:
    from gradsched.admission import OVERSUBSCRIPTION, usable_cpus

    return OVERSUBSCRIPTION * usable_cpus() + 1


TOO_MANY = _too_many()
"""Local ranks beyond the default oversubscription of this machine: refused unless
--oversubscribe."""


def oversubscribed(base: str, target: str) -> Probe:
    """--oversubscribe: ``base`` (asking for :data:`TOO_MANY` ranks) is refused before any
    rank starts; with the option the command goes on to start them."""
    return Probe(base, f"{base} --oversubscribe", base_code=2, reaches=target)
TARGETS = "tests/robustness/test_option_targets.py"


def _run() -> dict[str, Entry]:
    entries: dict[str, Entry] = {f"run {k}": v for k, v in stop_at(RUN, RUN_ITEMS, {
        "--bucket-cap-mb": "10", "--bucket-cap-mb-list": "1,2", "--batch-size": "8",
        "--world-size": "3", "--cluster": "1gbit", "--ranks-per-node": "1", "--iters": "3",
        "--warmup": "1", "--threads": "2", "--seed": "7", "--timeout-s": "30",
        "--profile": "prof", "--grad-accum": "2"}).items()}
    entries.update({
        "run --help": HELP,
        "run --plan": reach(RUN, "--plan {d}/tiny.plan.json", RUN_ITEMS),
        "run --baseline": reach(RUN_PLAN, "--baseline ddp", RUN_ITEMS),
        "run --ddp-caps-from": CoveredBy(
            "tests/commands/test_run_ddp_list.py::test_caps_from_plan_rebuild_the_plans_buckets",
            "stock DDP runs the plan's caps and rebuilds its buckets (2 gloo ranks)"),
        "run --compute": (refused(RUN, f"--compute {C}", RUN_ITEMS), CoveredBy(
            "tests/commands/test_run_ddp_list.py::test_caps_from_plan_rebuild_the_plans_buckets",
            "the trace the --ddp-caps-from plan was made for gives its caps")),
        "run --model": Probe(RUN, RUN.replace("tiny-mlp", "tiny-cnn"), reaches=RUN_ITEMS),
        "run --seq-len": (refused(RUN, "--seq-len 64", RUN_ITEMS),
                          reach(RUN.replace("tiny-mlp", "bert-base"), "--seq-len 64",
                                RUN_ITEMS)),
        "run --backend": reach(RUN, "--backend nccl", RUN_ITEMS),
        "run --ps-servers": (refused(RUN, "--ps-servers 1", RUN_ITEMS), CoveredBy(
            "tests/runtime/test_ps.py::test_run_cli_times_a_ps_plan",
            "a parameter-server plan timed on worker and server ranks")),
        "run --oversubscribe": oversubscribed(
            RUN.replace("--world-size 2", f"--world-size {TOO_MANY}"), RUN_ITEMS),
        "run --torchrun": refused(RUN, "--torchrun", RUN_ITEMS),
        "run --output": CoveredBy("tests/commands/test_run.py::test_per_iteration_rows_and_summary",
                                  "the per-iteration CSV and its summary are written there"),
    })
    return entries


CAPTURE = "capture compute --model tiny-mlp --batch-size 4 -o c.csv"
CAPTURE_IT = "capture iteration --model tiny-mlp --batch-size 4 -o it"
CAPTURE_COMM = "capture comm --max-bytes 1K -o m.csv"
COMPUTE_AT = "gradsched.capture.compute.capture_compute"
ITERATION_AT = "gradsched.capture.iteration.capture_iterations"
SWEEP_AT = "gradsched.capture.sweep.run_sweep"
SWEEP_TESTS = "tests/capture/test_sweep.py"


def _capture() -> dict[str, Entry]:
    c = "capture "
    entries: dict[str, Entry] = {
        "capture --help": HELP, c + "compute --help": HELP, c + "iteration --help": HELP,
        c + "comm --help": HELP,
        c + "compute --model": Probe(CAPTURE, CAPTURE.replace("tiny-mlp", "tiny-cnn"),
                                     reaches=COMPUTE_AT),
        c + "compute --seq-len": (refused(CAPTURE, "--seq-len 64", COMPUTE_AT), reach(
            CAPTURE.replace("tiny-mlp", "bert-base"), "--seq-len 64", COMPUTE_AT)),
        c + "compute --output": CoveredBy(
            "tests/capture/test_compute.py::test_cli_capture_of_a_tiny_cnn_validates",
            "the trace and its sidecar are written at -o"),
        c + "iteration --seq-len": (refused(CAPTURE_IT, "--seq-len 64", ITERATION_AT), reach(
            CAPTURE_IT.replace("tiny-mlp", "bert-base"), "--seq-len 64", ITERATION_AT)),
        c + "iteration --model": Probe(CAPTURE_IT, CAPTURE_IT.replace("tiny-mlp", "tiny-cnn"),
                                       reaches=ITERATION_AT),
        c + "iteration --torchrun": refused(CAPTURE_IT, "--torchrun", ITERATION_AT),
        c + "iteration --oversubscribe": oversubscribed(
            f"{CAPTURE_IT} --world-size {TOO_MANY}", ITERATION_AT),
        c + "iteration --output": reach(CAPTURE_IT, "-o elsewhere", ITERATION_AT),
        c + "comm --torchrun": refused(CAPTURE_COMM, "--torchrun", SWEEP_AT),
        c + "comm --oversubscribe": oversubscribed(f"{CAPTURE_COMM} --world-size {TOO_MANY}",
                                                   SWEEP_AT),
        c + "comm --output": CoveredBy(
            f"{SWEEP_TESTS}::test_two_rank_gloo_sweep_writes_a_valid_comm_trace",
            "the sweep's comm trace and sidecar are written at -o"),
    }
    for option, value in {"--batch-size": "8", "--dtype": "bf16", "--device": "cuda",
                          "--warmup": "1", "--iters": "2", "--threads": "1", "--clock": "cpu",
                          "--no-update": "", "--note": "noted"}.items():
        entries[f"{c}compute {option}"] = reach(CAPTURE, f"{option} {value}".strip(),
                                                 COMPUTE_AT)
    for option, value in {"--batch-size": "8", "--dtype": "bf16", "--world-size": "3",
                          "--backend": "nccl", "--device": "cuda", "--bucket-cap-mb": "1,5",
                          "--iters": "2", "--warmup": "3", "--threads": "2",
                          "--deadline-s": "60"}.items():
        entries[f"{c}iteration {option}"] = reach(CAPTURE_IT, f"{option} {value}",
                                                   ITERATION_AT)
    for option, value in {"--backend": "nccl", "--world-size": "3",
                          "--collectives": "broadcast", "--min-bytes": "64",
                          "--max-bytes": "2K", "--factor": "4", "--iters": "5", "--warmup": "1",
                          "--min-iters": "2", "--time-budget-s": "0.5", "--in-place": "",
                          "--threads": "2", "--cluster": "1gbit",
                          "--init-timeout-s": "30", "--timeout-s": "30",
                          "--deadline-s": "60", "--note": "noted"}.items():
        entries[f"{c}comm {option}"] = reach(CAPTURE_COMM, f"{option} {value}".strip(),
                                              SWEEP_AT)
    return entries


REEXEC_RUN = "reexec run --config {d}/reexec.yaml --case resnet18-b4-p2-tbf1gbit -o out"
RUN_CASE = "gradsched.commands.reexec.run_case"
INTERFERENCE = "reexec interference -o i.json"
CALIBRATE = "gradsched.commands.reexec.calibrate"


def _reexec_slow() -> dict[str, Entry]:
    r = "reexec "
    entries: dict[str, Entry] = {
        "reexec --help": HELP, r + "run --help": HELP, r + "interference --help": HELP,
        r + "run --config": Probe(REEXEC_RUN, REEXEC_RUN.replace("reexec.yaml", "reexec2.yaml"),
                                  reaches=RUN_CASE),
        r + "run --case": Probe(REEXEC_RUN, REEXEC_RUN.replace("-b4-", "-b16-"),
                                reaches=RUN_CASE),
        r + "run --list": reach(REEXEC_RUN, "--list", RUN_CASE),
        r + "run --oversubscribe": oversubscribed(
            REEXEC_RUN.replace("reexec.yaml", "reexec-many.yaml").replace(
                "-p2-", f"-p{TOO_MANY}-"), RUN_CASE),
        r + "run --output": reach(REEXEC_RUN, "-o elsewhere", RUN_CASE),
        r + "interference --oversubscribe": oversubscribed(
            f"{INTERFERENCE} --world-size {TOO_MANY}", CALIBRATE),
        r + "interference --output": reach(INTERFERENCE, "-o j.json", CALIBRATE),
    }
    entries.update({f"{r}run {k}": v for k, v in stop_at(REEXEC_RUN, RUN_CASE, {
        "--iters": "2", "--warmup": "0", "--rounds": "2", "--interference": "{d}/inter.json",
        "--allow-load": ""}).items()})
    entries.update({f"{r}interference {k}": v for k, v in stop_at(INTERFERENCE, CALIBRATE, {
        "--backend": "nccl", "--world-size": "3", "--threads": "2", "--cluster": "1gbit",
        "--comm-bytes": "1M", "--small-bytes": "8K", "--kernel": "matmul", "--rounds": "2",
        "--reps": "3"}).items()})
    return entries


SHARD_RUN = ("shard run --model resnet18 --batch-size 4 --world-size 2 --plan {d}/fsdp2.json "
             "-o r.csv")
RUN_PLANS = "gradsched.reexec.sharded.run_plans"
MEASURE = (f"shard measure --model resnet18 --batch-size 4 --world-size 2 --network tbf1gbit "
           f"--compute {C} --comm {M} -o m")
MEASURE_AT = "gradsched.reexec.sharded.measure"


def _shard_slow() -> dict[str, Entry]:
    s = "shard "
    entries: dict[str, Entry] = {
        s + "run --help": HELP, s + "measure --help": HELP,
        s + "run --plan": reach(SHARD_RUN, "--plan {d}/zero3.json", RUN_PLANS),
        s + "run --model": Probe(SHARD_RUN, SHARD_RUN.replace("resnet18", "resnet34"),
                                 reaches=RUN_PLANS),
        s + "run --seq-len": refused(SHARD_RUN, "--seq-len 64", RUN_PLANS),
        s + "run --output": CoveredBy(
            f"{TARGETS}::test_shard_run_output_gets_a_row_per_timed_iteration",
            "one row per plan and timed iteration at -o (the ranks' times stood in)"),
        s + "measure --compute": Probe(MEASURE, MEASURE.replace(C, C16), reaches=MEASURE_AT),
        s + "measure --comm": Probe(MEASURE, MEASURE.replace(M, "{d}/m100.csv"),
                                    reaches=MEASURE_AT),
        s + "measure --output": CoveredBy(
            f"{TARGETS}::test_shard_measure_output_is_the_folder_of_its_tables",
            "measured.csv, iterations.csv, meta.json and plans/ in the folder (the "
            "measurement stood in)"),
    }
    entries.update({f"{s}run {k}": v for k, v in stop_at(SHARD_RUN, RUN_PLANS, {
        "--batch-size": "8", "--world-size": "3", "--cluster": "tbf1gbit", "--rounds": "1",
        "--iters": "2", "--warmup": "2", "--timeout-s": "60", "--grad-accum": "2"}).items()})
    entries.update({
        s + "run --oversubscribe": oversubscribed(
            SHARD_RUN.replace("--world-size 2", f"--world-size {TOO_MANY}"), RUN_PLANS),
        s + "measure --oversubscribe": oversubscribed(
            MEASURE.replace("--world-size 2", f"--world-size {TOO_MANY}"), MEASURE_AT),
    })
    entries.update({f"{s}measure {k}": v for k, v in stop_at(MEASURE, MEASURE_AT, {
        "--algorithms": "fsdp2", "--memory-cap": "100M", "--rounds": "1", "--iters": "2",
        "--warmup": "2", "--timeout-s": "60"}).items()})
    entries.update({
        s + "measure --model": Probe(MEASURE, MEASURE.replace(
            "resnet18 --batch-size 4", "mobilenet_v2 --batch-size 8"), reaches=MEASURE_AT),
        s + "measure --batch-size": Probe(MEASURE, MEASURE.replace(
            "--batch-size 4", "--batch-size 16"), reaches=MEASURE_AT),
        s + "measure --world-size": Probe(MEASURE, MEASURE.replace(
            "--world-size 2", "--world-size 3"), reaches=MEASURE_AT),
        s + "measure --network": Probe(MEASURE, MEASURE.replace("tbf1gbit", "tbf100mbit"),
                                       reaches=MEASURE_AT),
    })
    return entries


BENCH = "bench collectives --algorithms default -o b.csv"
RUN_BENCH = "gradsched.collectives.bench.run_bench"
TRAIN = "compress train -o tr"
TRAIN_AT = "gradsched.compression.train.run_experiment"
PROFILE = "compress profile --methods dense --densities 1/16 --sizes 1K --reps 1 -o p.csv"
PROFILE_AT = "gradsched.compression.profile.profile_compressors"
ADV_VAL = f"{ADV} --validate"
VALIDATE = "gradsched.reexec.validate.validate"
CLUSTER = "cluster -- true"
EMULATED = "gradsched.distributed.cluster.EmulatedCluster"



def _bench_compress_cluster() -> dict[str, Entry]:
    entries: dict[str, Entry] = {
        "bench --help": HELP, "bench collectives --help": HELP,
        "bench collectives --algorithms": Probe(BENCH, BENCH.replace("default", "ring"),
                                                reaches=RUN_BENCH),
        "bench collectives --oversubscribe": oversubscribed(
            f"{BENCH} --world-size {TOO_MANY}", RUN_BENCH),
        "bench collectives --output": CoveredBy(
            "tests/collectives/test_bench.py::test_bench_command_end_to_end",
            "a tiny real sweep's comm trace is read back from -o"),
        "bench collectives --tuned-out": CoveredBy(
            "tests/collectives/test_bench.py::test_bench_command_end_to_end",
            "the tuned model JSON written there is loaded as a comm model"),
        "compress --help": HELP, "compress train --help": HELP,
        "compress train --oversubscribe": oversubscribed(
            f"{TRAIN} --world-size {min(TOO_MANY, 1024)}", TRAIN_AT),
        "compress train --output": reach(TRAIN, "-o elsewhere", TRAIN_AT),
        "compress profile --help": HELP,
        "compress profile --output": Output(PROFILE, PROFILE.replace("-o p.csv", "-o o.csv"),
                                            "o.csv"),
        "advise --validate": reach(ADV, "--validate", VALIDATE),
        "cluster --help": HELP,
        # options before the command: what follows "--" is the command's own
        "cluster --world-size": Probe(CLUSTER, "cluster --world-size 3 -- true", reaches=EMULATED),
        "cluster --rate": Probe(CLUSTER, "cluster --rate 100mbit -- true", reaches=EMULATED),
        "cluster argv": Probe(CLUSTER, "cluster", expect="refused", reaches=EMULATED),
        "cluster --oversubscribe": Probe(f"cluster --world-size {TOO_MANY} -- true",
                                         f"cluster --world-size {TOO_MANY} --oversubscribe -- true",
                                         base_code=2, reaches=EMULATED),
        "cluster --keep-going": CoveredBy(
            f"{TARGETS}::test_cluster_keep_going_lets_the_other_ranks_finish",
            "the other ranks finish after one fails (local ranks stand in for namespaces)"),
        "cluster --deadline-s": CoveredBy(
            f"{TARGETS}::test_cluster_deadline_s_stops_every_rank",
            "every rank is stopped at the deadline, exit 124"),
        "cluster --master-port": CoveredBy(
            f"{TARGETS}::test_cluster_master_port_reaches_every_rank",
            "every rank's MASTER_PORT"),
    }
    entries.update({f"bench collectives {k}": v for k, v in stop_at(BENCH, RUN_BENCH, {
        "--collective": "broadcast", "--world-size": "3",
        "--min-bytes": "64", "--max-bytes": "1M", "--per-octave": "2", "--min-iters": "2",
        "--max-iters": "10", "--target-s": "0.5", "--lp-chunk": "64K",
        "--lp-link": "1e-5,1e-9,0", "--cluster": "1gbit", "--backend": "mpi",
        "--timeout-s": "30", "--deadline-s": "60", "--note": "noted"}).items()})
    entries.update({f"compress train {k}": v for k, v in stop_at(TRAIN, TRAIN_AT, {
        "--world-size": "2", "--methods": "dense", "--densities": "1/4", "--seeds": "0",
        "--steps": "10", "--eval-every": "5", "--batch-size": "8", "--lr": "0.1",
        "--momentum": "0.5", "--deadline-s": "60"}).items()})
    entries.update({f"compress profile {k}": v for k, v in stop_at(PROFILE, PROFILE_AT, {
        "--methods": "topk", "--densities": "1/4", "--world-size": "2", "--sizes": "2K",
        "--reps": "2", "--threads": "2"}).items()})
    return entries


DIAG = "diagnose {R}/data/external/hta/nccl_parser_config/nccl_data.json.gz"


def _diagnose() -> dict[str, Entry]:
    g = "diagnose "
    return {
        g + "--help": HELP,
        g + "traces": Probe(DIAG, "diagnose {R}/data/external/param/dlrm_kineto.tar.gz",
                            "stdout"),
        g + "--comm": more(DIAG, f"--comm {AB}", compare="stdout"),
        g + "--framework": more(DIAG, "--framework deepspeed", compare="stdout"),
        g + "--step": more(DIAG, "--step 4", compare="stdout"),
        g + "--csv": Output(DIAG, f"{DIAG} --csv d.csv", "d.csv"),
        g + "--causes-csv": Output(DIAG, f"{DIAG} --causes-csv c.csv", "c.csv"),
        g + "--planted": (Output(DIAG, f"{DIAG} --planted p.csv", "p.csv"),
                          refused(f"{DIAG} --planted p.csv", "--step 4")),
        g + "--tables": Output(DIAG, f"{DIAG} --tables t", "t/diagnose-collectives.tex"),
    }


# --------------------------------------------------------------------------- batch


def _batch() -> dict[str, Entry]:
    return {
        "batch --help": HELP,
        # the job list is the batch's whole input (tests/commands/test_batch.py: each
        # line writes what it writes alone)
        "batch jobs": Probe("batch {R}/tests/commands/batch-jobs/none.txt",
                            "batch {R}/tests/commands/batch-jobs/columns.txt"),
    }


# --------------------------------------------------------------------------- the registry


def registry() -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    for part in (_replay, _plan, _advise, _fit, _shard, _study, _traces, _import, _report,
                 _reexec_bench, _run, _capture, _reexec_slow, _shard_slow,
                 _bench_compress_cluster, _diagnose, _batch):
        entries.update(part())
    return entries


REGISTRY = registry()

__all__ = ["REGISTRY", "SLOW", "CoveredBy", "Exempt", "Output", "Probe", "Unprobed",
           "make_inputs"]


# --------------------------------------------------------------------------- shard accumulate

SHA = f"shard accumulate --compute {C} --comm {M} --world-size 2 --grad-accum 2"


def _shard_accumulate() -> dict[str, Entry]:
    s = "shard accumulate "
    return {
        s + "--help": HELP,
        s + "--compute": Probe(SHA, SHA.replace(C, C16), "stdout"),
        s + "--comm": Probe(SHA, SHA.replace(M, AB), "stdout"),
        s + "--world-size": Probe(SHA.replace(M, AB), SHA.replace(M, AB).replace(
            "--world-size 2", "--world-size 4"), "stdout"),
        s + "--semantics": more(SHA, "--semantics blocking", compare="stdout"),
        s + "--grad-accum": Probe(SHA, SHA.replace("--grad-accum 2", "--grad-accum 4"),
                                  "stdout"),
        s + "--algorithm": more(SHA, "--algorithm zero3", compare="stdout"),
        s + "--plan": (more(SHA, "--plan {d}/zero3.json", compare="stdout"),
                       refused(SHA, "--plan {d}/zero3.json --algorithm fsdp2")),
        s + "--memory-cap": more(SHA, "--memory-cap 30M", compare="stdout"),
        s + "--output": Output(SHA, f"{SHA} -o a.csv", "a.csv"),
        # HSDP: adds no-all-reduce and the all-reduces; refused when R x S != world size
        s + "--mesh": (more(SHA4, "--mesh 2x2", compare="stdout"), refused(SHA, "--mesh 2x2")),
    }


SHA4 = SHA.replace(M, AB).replace("--world-size 2", "--world-size 4")
REGISTRY.update(_shard_accumulate())


# --------------------------------------------------------------------------- shard rival

RIVAL_TEST = "tests/commands/test_shard_rival.py::test_the_options_change_the_table"
RIVAL_REASON = ("each run solves the FSDP-unit MILP twice (seconds to minutes on a real "
                "trace): the test runs it on a small synthetic trace")
RIVAL_RUN = "{R}/paper/data/sharded-rival/resnet18-b4-p2-loopback"


def _shard_rival() -> dict[str, Entry]:
    s = "shard rival "
    entries: dict[str, Entry] = {s + "--help": HELP}
    for option in ("--comm", "--world-size", "--semantics", "--plans-dir", "--output"):
        entries[s + option] = CoveredBy(RIVAL_TEST, RIVAL_REASON)
    entries[s + "--compute"] = CoveredBy(
        "tests/commands/test_shard_rival.py::test_another_trace_is_another_table", RIVAL_REASON)
    r = "report "
    inputs = {  # verb: (its input, another input of the same kind)
        "accumulation-table": ("{d}/acc2.csv", "{d}/acc4.csv"),
        "fsdp-rival-table": (f"{RIVAL_RUN}/replayed.csv", "{d}/rival-head.csv"),
        "fsdp-rival-measured-table": (f"{RIVAL_RUN}/iterations.csv", "{d}/run-head.csv"),
    }
    for verb, (first, other) in inputs.items():
        base = f"report {verb} --input {first} --tex t.tex --md t.md"
        entries.update({
            f"{r}{verb} --help": HELP,
            f"{r}{verb} --input": Probe(base, base.replace(first, other)),
            f"{r}{verb} --tex": Output(base, base.replace("--tex t.tex", "--tex o.tex"),
                                       "o.tex"),
            f"{r}{verb} --md": Output(base, base.replace("--md t.md", "--md o.md"), "o.md"),
            f"{r}{verb} --title": more(base, "--title Title"),
        })
    return entries


REGISTRY.update(_shard_rival())
_make_inputs = make_inputs


def make_inputs(d: Path) -> None:  # the inputs above, and the rival tables'
    """:func:`_make_inputs`, then the accumulation and rival tables' inputs."""
    import pandas as pd

    _make_inputs(d)
    for k in (2, 4):
        _gradsched(f"shard accumulate --compute {C} --comm {M} --world-size 2 --grad-accum {k} "
                   f"-o {{d}}/acc{k}.csv", d)
    run = Path(RIVAL_RUN.replace("{R}", str(REPO)))
    pd.read_csv(run / "replayed.csv").head(3).to_csv(d / "rival-head.csv", index=False)
    pd.read_csv(run / "iterations.csv").head(6).to_csv(d / "run-head.csv", index=False)
