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
# then allow it), else the `capture:` mapping of config/capture.yaml (checked against
# workflow/schemas/capture.schema.yaml in common.smk). Targets and command-line arguments
# come from gradsched.pipeline.capture. Keys:
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


CAPTURE = checked(
    capture_stage.select_spec, config.get("capture"), CAPTURE_FILE.get("capture")
)
# torchrun of the interpreter running Snakemake (the .venv one).
TORCHRUN = capture_stage.torchrun_command(sys.executable)


def capture_targets(tier):
    """Outputs of one tier (cpu, cluster or gpu)."""
    return checked(capture_stage.capture_targets, CAPTURE, tier, RESULTS)


def _compute_entry(wc):
    return checked(capture_stage.compute_entry, CAPTURE, wc.device, wc.stem)


def _compute_args(wc):
    return checked(capture_stage.compute_args, CAPTURE, wc.device, wc.stem)


def _comm_args(kind, name):
    return checked(capture_stage.comm_args, CAPTURE, kind, name)


def _comm_nproc(name):
    return checked(capture_stage.comm_nproc, CAPTURE, name)


def _iteration_args(name, gpu):
    return checked(capture_stage.iteration_args, CAPTURE, name, gpu)


def _iteration_nproc(name):
    return checked(capture_stage.iteration_nproc, CAPTURE, name)


localrules:
    capture,
    capture_cpu,
    capture_cluster,
    capture_gpu,


rule capture:
    """Every capture of the tiers in capture.tiers (default: cpu)."""
    input:
        checked(capture_stage.tier_targets, CAPTURE, RESULTS),


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
        gpu=lambda wc: 1 if capture_stage.is_gpu(_compute_entry(wc)) else 0,
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
        gpu=lambda wc: _comm_nproc(wc.name),
        cpus_per_task=lambda wc: 2 * _comm_nproc(wc.name),
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
        gpu=lambda wc: _iteration_nproc(wc.name),
        cpus_per_task=lambda wc: 2 * _iteration_nproc(wc.name),
        runtime=60,
    params:
        args=lambda wc: _iteration_args(wc.name, True),
        out=lambda wc: f"{RESULTS}/capture/iteration/gpu/{wc.name}",
    shell:
        "{TORCHRUN} --standalone --nnodes=1 --nproc-per-node={resources.gpu} "
        "-m gradsched capture iteration --torchrun {params.args} -o {params.out} "
        "> {log} 2>&1"
