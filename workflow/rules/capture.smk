# Stage: capture (hardware tier). Measures NEW traces with PyTorch; never part of `all`.
#   snakemake --profile profiles/default capture        (the tiers listed in capture.tiers)
#   snakemake --profile profiles/default capture_cpu    (compute + loopback sweeps + CPU DDP)
#   sudo ... snakemake ... capture_cluster              (emulated cluster: needs root)
#   snakemake --profile profiles/slurm capture_gpu      (GPU: resources gpu=N, torchrun)
# Outputs that exist are not re-measured; --forcerun capture_compute re-measures.
# Captures land under results/captured/ (mirroring traces/): committed traces are pure
# inputs of `all`, never outputs. To adopt a capture, review it and copy the CSV and its
# .meta.json into traces/ (e.g. traces/compute/cpu/), then add it to config/config.yaml.
#
# Configuration: the `capture:` mapping of the main config when present (the schema must
# then allow it), else the `capture:` mapping of config/capture.yaml. Keys:
#   capture.tiers               list of cpu | cluster | gpu built by the `capture` target
#   capture.defaults            warmup, iters, threads, clock, dtype, device (compute entries)
#   capture.compute[]           model, batch_size, [seq_len, device, dtype, warmup, iters,
#                               threads, clock (wall | cpu), no_update, note, stem]
#                               -> results/captured/compute/<device>/<stem>.csv (+ .meta.json);
#                               device cuda = tier gpu (resources gpu=1)
#   capture.comm.loopback[]     name, backend, world_size, [collectives, min_bytes,
#                               max_bytes, factor, iters, warmup, min_iters, time_budget_s,
#                               threads_per_rank, in_place, note]
#                               -> results/captured/comm/loopback/<name>.csv
#   capture.comm.cluster[]      the same plus rate (tc units, e.g. 1gbit); needs root
#                               -> results/captured/comm/cluster/<name>.csv
#   capture.comm.torchrun[]     the same with nproc_per_node instead of world_size (GPU)
#                               -> results/captured/comm/gpu/<name>.csv
#   capture.iteration[]         name, model, batch_size, [world_size | nproc_per_node,
#                               backend, device, dtype, seq_len, bucket_cap_mb (list),
#                               iters, warmup, threads_per_rank]
#                               -> results/capture/iteration/{cpu,gpu}/<name>/ (Kineto
#                               traces per rank and bucket cap, summary.csv, meta.json)


def _load_capture():
    spec = config.get("capture")
    if spec is None:
        path = Path("config/capture.yaml")
        if not path.is_file():
            return {}
        spec = (yaml.safe_load(path.read_text()) or {}).get("capture") or {}
    if not isinstance(spec, dict):
        _fail("capture: must be a mapping")
    return spec


CAPTURE = _load_capture()
CAPTURE_TIERS = ("cpu", "cluster", "gpu")
_tmp = Path(sys.executable).parent / "torchrun"
# torchrun of the interpreter running Snakemake (the .venv one).
TORCHRUN = (
    shlex.quote(str(_tmp))
    if _tmp.exists()
    else f"{shlex.quote(sys.executable)} -m torch.distributed.run"
)

_COMPUTE_FLAGS = {
    "model": "--model",
    "batch_size": "--batch-size",
    "seq_len": "--seq-len",
    "device": "--device",
    "dtype": "--dtype",
    "warmup": "--warmup",
    "iters": "--iters",
    "threads": "--threads",
    "clock": "--clock",
    "note": "--note",
}
_COMM_FLAGS = {
    "backend": "--backend",
    "world_size": "--world-size",
    "collectives": "--collectives",
    "min_bytes": "--min-bytes",
    "max_bytes": "--max-bytes",
    "factor": "--factor",
    "iters": "--iters",
    "warmup": "--warmup",
    "min_iters": "--min-iters",
    "time_budget_s": "--time-budget-s",
    "threads_per_rank": "--threads-per-rank",
    "rate": "--cluster",
    "note": "--note",
}
_ITERATION_FLAGS = {
    "model": "--model",
    "batch_size": "--batch-size",
    "seq_len": "--seq-len",
    "device": "--device",
    "dtype": "--dtype",
    "backend": "--backend",
    "world_size": "--world-size",
    "bucket_cap_mb": "--bucket-cap-mb",
    "iters": "--iters",
    "warmup": "--warmup",
    "threads_per_rank": "--threads-per-rank",
}


def _flags(entry, table, where, skip=()):
    args = []
    for key, value in entry.items():
        if key in skip:
            continue
        if key not in table:
            _fail(f"{where}: unknown key {key!r}; known: {', '.join(sorted(table))}")
        if isinstance(value, bool):
            _fail(f"{where}: {key} must not be a boolean")
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        args.append(f"{table[key]} {shlex.quote(str(value))}")
    return " ".join(args)


def _compute_entries():
    """{"<device>/<stem>": merged entry} of capture.compute."""
    defaults = CAPTURE.get("defaults") or {}
    out = {}
    for i, raw in enumerate(CAPTURE.get("compute") or []):
        entry = {**defaults, **raw}
        for key in ("model", "batch_size"):
            if key not in entry:
                _fail(f"capture.compute[{i}]: missing {key}")
        device = str(entry.get("device", "cpu")).split(":")[0]
        seq = f"-s{entry['seq_len']}" if entry.get("seq_len") else ""
        model = str(entry["model"]).replace(":", "-").replace(".", "-")
        stem = entry.get("stem") or (
            f"{model}{seq}-b{entry['batch_size']}-{device}-{entry.get('dtype', 'fp32')}"
        )
        key = f"{device}/{stem}"
        if key in out:
            _fail(f"capture.compute[{i}]: a second entry for {key}")
        out[key] = entry
    return out


def _compute_entry(wc):
    key = f"{wc.device}/{wc.stem}"
    entries = _compute_entries()
    if key not in entries:
        _fail(
            f"no capture.compute entry makes results/captured/compute/{key}.csv; "
            f"configured: {', '.join(sorted(entries))}"
        )
    return entries[key]


def _compute_args(wc):
    entry = _compute_entry(wc)
    args = _flags(entry, _COMPUTE_FLAGS, "capture.compute", skip=("stem", "no_update"))
    return args + (" --no-update" if entry.get("no_update") else "")


def _is_gpu(entry):
    return str(entry.get("device", "cpu")).startswith("cuda") or (
        entry.get("backend") == "nccl"
    )


def _comm_entries(kind):
    out = {}
    for i, entry in enumerate((CAPTURE.get("comm") or {}).get(kind) or []):
        if "name" not in entry:
            _fail(f"capture.comm.{kind}[{i}]: missing name")
        if kind == "cluster" and "rate" not in entry:
            _fail(f"capture.comm.cluster[{i}]: missing rate (e.g. 1gbit)")
        if kind == "torchrun" and "nproc_per_node" not in entry:
            _fail(f"capture.comm.torchrun[{i}]: missing nproc_per_node")
        out[entry["name"]] = entry
    return out


def _comm_entry(kind, name):
    entries = _comm_entries(kind)
    if name not in entries:
        _fail(f"no capture.comm.{kind} entry named {name!r}")
    return entries[name]


def _comm_args(kind, name):
    entry = _comm_entry(kind, name)
    args = _flags(
        entry,
        _COMM_FLAGS,
        f"capture.comm.{kind}",
        skip=("name", "nproc_per_node", "in_place"),
    )
    return args + (" --in-place" if entry.get("in_place") else "")


def _iteration_entries(gpu):
    out = {}
    for i, entry in enumerate(CAPTURE.get("iteration") or []):
        for key in ("name", "model", "batch_size"):
            if key not in entry:
                _fail(f"capture.iteration[{i}]: missing {key}")
        if ("nproc_per_node" in entry) == gpu:
            out[entry["name"]] = entry
    return out


def _iteration_args(name, gpu):
    entries = _iteration_entries(gpu)
    if name not in entries:
        _fail(f"no capture.iteration entry named {name!r} for this launcher")
    return _flags(
        entries[name],
        _ITERATION_FLAGS,
        "capture.iteration",
        skip=("name", "nproc_per_node"),
    )


def _nproc(entries, name):
    return int(entries.get(name, {}).get("nproc_per_node", 1))


def capture_targets(tier):
    """Outputs of one tier (cpu, cluster or gpu)."""
    if tier not in CAPTURE_TIERS:
        _fail(f"capture.tiers: unknown tier {tier!r}; use {', '.join(CAPTURE_TIERS)}")
    out = []
    for key, entry in _compute_entries().items():
        if _is_gpu(entry) == (tier == "gpu") and tier != "cluster":
            out.append(f"results/captured/compute/{key}.csv")
    if tier == "cpu":
        out += [
            f"results/captured/comm/loopback/{n}.csv" for n in _comm_entries("loopback")
        ]
        out += [
            f"{RESULTS}/capture/iteration/cpu/{n}/summary.csv"
            for n in _iteration_entries(False)
        ]
    elif tier == "cluster":
        out += [
            f"results/captured/comm/cluster/{n}.csv" for n in _comm_entries("cluster")
        ]
    else:
        out += [f"results/captured/comm/gpu/{n}.csv" for n in _comm_entries("torchrun")]
        out += [
            f"{RESULTS}/capture/iteration/gpu/{n}/summary.csv"
            for n in _iteration_entries(True)
        ]
    return out


localrules:
    capture,
    capture_cpu,
    capture_cluster,
    capture_gpu,


rule capture:
    """Every capture of the tiers in capture.tiers (default: cpu)."""
    input:
        [t for tier in CAPTURE.get("tiers", ["cpu"]) for t in capture_targets(tier)],


rule capture_cpu:
    input:
        capture_targets("cpu"),


rule capture_cluster:
    input:
        capture_targets("cluster"),


rule capture_gpu:
    input:
        capture_targets("gpu"),


rule capture_compute:
    """One compute trace: per-tensor forward/backward/update times (hooks)."""
    output:
        csv="results/captured/compute/{device}/{stem}.csv",
        meta="results/captured/compute/{device}/{stem}.meta.json",
    log:
        f"{LOGS}/capture/compute/{{device}}/{{stem}}.log",
    wildcard_constraints:
        device="cpu|cuda",
    threads: 1
    resources:
        gpu=lambda wc: 1 if _is_gpu(_compute_entry(wc)) else 0,
        cpus_per_task=lambda wc: int(_compute_entry(wc).get("threads") or 1),
        runtime=60,
    params:
        args=_compute_args,
    shell:
        "{GS} capture compute {params.args} -o {output.csv} > {log} 2>&1"


rule capture_comm_loopback:
    """A collective sweep with local ranks on loopback (gloo)."""
    output:
        csv="results/captured/comm/loopback/{name}.csv",
        meta="results/captured/comm/loopback/{name}.meta.json",
    log:
        f"{LOGS}/capture/comm/loopback/{{name}}.log",
    resources:
        runtime=60,
    params:
        args=lambda wc: _comm_args("loopback", wc.name),
    shell:
        "{GS} capture comm {params.args} -o {output.csv} > {log} 2>&1"


rule capture_comm_cluster:
    """A collective sweep on the emulated cluster (one network namespace per rank, links
    shaped with tc). Needs root."""
    output:
        csv="results/captured/comm/cluster/{name}.csv",
        meta="results/captured/comm/cluster/{name}.meta.json",
    log:
        f"{LOGS}/capture/comm/cluster/{{name}}.log",
    resources:
        runtime=60,
    params:
        args=lambda wc: _comm_args("cluster", wc.name),
    shell:
        "{GS} capture comm {params.args} -o {output.csv} > {log} 2>&1"


rule capture_comm_torchrun:
    """A collective sweep with one process per GPU (torchrun, NCCL); SLURM: gpu=N."""
    output:
        csv="results/captured/comm/gpu/{name}.csv",
        meta="results/captured/comm/gpu/{name}.meta.json",
    log:
        f"{LOGS}/capture/comm/gpu/{{name}}.log",
    resources:
        gpu=lambda wc: _nproc(_comm_entries("torchrun"), wc.name),
        cpus_per_task=lambda wc: 2 * _nproc(_comm_entries("torchrun"), wc.name),
        runtime=60,
    params:
        args=lambda wc: _comm_args("torchrun", wc.name),
    shell:
        "{TORCHRUN} --standalone --nnodes=1 --nproc-per-node={resources.gpu} "
        "-m gradsched capture comm --torchrun {params.args} -o {output.csv} > {log} 2>&1"


rule capture_iteration:
    """Profiled DDP iterations with local ranks (gloo on CPU): Kineto traces + summary."""
    output:
        summary=f"{RESULTS}/capture/iteration/cpu/{{name}}/summary.csv",
    log:
        f"{LOGS}/capture/iteration/cpu/{{name}}.log",
    resources:
        runtime=60,
    params:
        args=lambda wc: _iteration_args(wc.name, False),
        out=lambda wc: f"{RESULTS}/capture/iteration/cpu/{wc.name}",
    shell:
        "{GS} capture iteration {params.args} -o {params.out} > {log} 2>&1"


rule capture_iteration_torchrun:
    """Profiled DDP iterations with one process per GPU (torchrun, NCCL); SLURM: gpu=N."""
    output:
        summary=f"{RESULTS}/capture/iteration/gpu/{{name}}/summary.csv",
    log:
        f"{LOGS}/capture/iteration/gpu/{{name}}.log",
    resources:
        gpu=lambda wc: _nproc(_iteration_entries(True), wc.name),
        cpus_per_task=lambda wc: 2 * _nproc(_iteration_entries(True), wc.name),
        runtime=60,
    params:
        args=lambda wc: _iteration_args(wc.name, True),
        out=lambda wc: f"{RESULTS}/capture/iteration/gpu/{wc.name}",
    shell:
        "{TORCHRUN} --standalone --nnodes=1 --nproc-per-node={resources.gpu} "
        "-m gradsched capture iteration --torchrun {params.args} -o {params.out} "
        "> {log} 2>&1"
