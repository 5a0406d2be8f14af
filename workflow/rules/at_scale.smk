# Stage: end to end at scale (in `all` via TABLES). Published throughput of pure FSDP
# training at several GPU counts (data/external/at-scale/points.csv, 35 groups), calibrated
# on the smallest count of each group (one utilisation), every other count predicted with
# the FSDP2 replay of the FLOPs model's trace. Comm models, one per GPU type, all proxies
# (measured on other clusters than the published runs): A100 = the ABCI A100 cross-world-size
# model (extrapolate.smk, fitted at 32 and 128 ranks); H100 and H200 = the AWS p5 2 x 8
# H100 all-reduce sweep, scaled by the ring formula from its one world size (16): the
# `before` variant. The others price collectives with the two-level NCCL model and switch on
# the overlap slowdown (overlap.smk) and the stragglers (stragglers.smk). Seconds.
#
# Variants: one study per entry of AT_SCALE_VARIANTS (comm model per GPU type, switches), one
# row each in the variants table, so each model's effect is a difference of rows. `free-comm`
# prices every collective at zero: it must reproduce perfect scaling exactly (a check of the
# arithmetic). AT_SCALE_MAIN is the variant of the per-group table and the prose macros.
AT_SCALE_POINTS = "data/external/at-scale/points.csv"
AT_SCALE_H100_SWEEP = "traces/comm/external/nccl-aws-p5-2x8-h100-allreduce.csv"
AT_SCALE_A100 = f"{RESULTS}/extrapolate/abci-a100-ib.scaled.json"
AT_SCALE_H100 = f"{RESULTS}/at-scale/p5-h100.scaled.json"
AT_SCALE_FREE = "alpha-beta:alpha=0,beta=0"
# The two-level NCCL models: calibrated on the ABCI A100 2-node sweep (nccl.smk's series). For
# the A100 points moved to the interconnect their source states ("1600 Gbps node-node
# interconnect (RoCE)": eight 200 Gbit/s NICs per 8-GPU node, against ABCI's four; rule
# at_scale_a100_model); for H100 and H200 moved to an HGX H100 node with eight 400 Gbit/s NICs
# (nccl.smk; a proxy: no H100 source states its interconnect, nothing measured there).
AT_SCALE_ABCI_A100 = [
    f"traces/comm/external/nccl-abci-inter-anode-{n}.csv" for n in (2, 4, 8, 16)
]
AT_SCALE_A100_HARDWARE = "abci-a100:nics_per_node=8"
AT_SCALE_NCCL_A100 = f"{RESULTS}/at-scale/models/a100-8x200g.json"
AT_SCALE_NCCL_H100 = f"{RESULTS}/nccl/models/h100-8x400g.json"
AT_SCALE_NCCL = {
    "a100": AT_SCALE_NCCL_A100,
    "h100": AT_SCALE_NCCL_H100,
    "h200": AT_SCALE_NCCL_H100,
}
# The per-unit synchronisation waits (gradsched.experiments.at_scale.sync): the independent
# per-unit kernel-time jitter, fitted on the H200 ProfilerStep traces (data/h200/kineto-steps)
# and validated on the public A100/V100 Kineto traces with identical steps (HTA's examples);
# traces whose steps run different kernels are listed and not measured.
AT_SCALE_UNIT_JITTER = f"{RESULTS}/at-scale/unit-jitter.csv"
AT_SCALE_UNIT_JITTER_FIT = sorted(
    glob.glob("data/h200/kineto-steps/*.pt.trace.json.gz")
)
AT_SCALE_UNIT_JITTER_VALIDATE = [
    "data/external/hta/nccl_parser_config/nccl_data.json.gz",
    "data/external/hta/negative_queue_length_values_check/rank0.json.gz",
    "data/external/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "data/external/hta/trace_diff/control/control.json.gz",
    "data/external/hta/trace_diff/test/test.json.gz",
]
UNIT = f"--unit-jitter {AT_SCALE_UNIT_JITTER}"
AT_SCALE_VARIANTS = {
    "before": {
        "comm": {"a100": AT_SCALE_A100, "h100": AT_SCALE_H100, "h200": AT_SCALE_H100},
        "flags": "",
    },
    "nccl": {"comm": AT_SCALE_NCCL, "flags": ""},
    "nccl-overlap": {"comm": AT_SCALE_NCCL, "flags": "--overlap-slowdown"},
    "nccl-stragglers": {"comm": AT_SCALE_NCCL, "flags": "--stragglers"},
    "nccl-overlap-stragglers": {
        "comm": AT_SCALE_NCCL,
        "flags": "--overlap-slowdown --stragglers",
    },
    "nccl-unit-sync": {"comm": AT_SCALE_NCCL, "flags": UNIT},
    "all-effects": {
        "comm": AT_SCALE_NCCL,
        "flags": f"--overlap-slowdown --stragglers {UNIT}",
    },
    "free-comm": {
        "comm": {"a100": AT_SCALE_FREE, "h100": AT_SCALE_FREE, "h200": AT_SCALE_FREE},
        "flags": "",
    },
}
AT_SCALE_MAIN = "all-effects"
# The decomposition of the main variant's missing growth (what the published steps would
# need: exposed communication, a collective-time factor and the bus bandwidth it implies, an
# overlap slowdown; gradsched.experiments.at_scale.decompose): the groups whose growth the
# effects explain least, llm-foundry's H100 128-512 GPU rows.
AT_SCALE_DECOMPOSE = "llm-foundry-h10080-large"
TABLES += ["at-scale", "at-scale-variants", "at-scale-effects", "at-scale-decompose"]


def at_scale_comm_files(variant):
    """The comm model files of a variant (inline alpha-beta specs are not files)."""
    comm = AT_SCALE_VARIANTS[variant]["comm"]
    return sorted(
        {spec for spec in comm.values() if not spec.startswith("alpha-beta:")}
    )


def at_scale_comm_args(variant):
    comm = AT_SCALE_VARIANTS[variant]["comm"]
    return " ".join(f"--comm {gpu}={spec}" for gpu, spec in comm.items())


def at_scale_study_line(variant):
    """The `gradsched batch` line of one variant's study (the main variant's adds the
    decomposition of its missing growth)."""
    out = f"{RESULTS}/at-scale/{variant}"
    flags = AT_SCALE_VARIANTS[variant]["flags"]
    args = (
        f"study at-scale --points {AT_SCALE_POINTS} {at_scale_comm_args(variant)} "
        f"{flags} --variant {variant} -o {out}/points.csv --groups-out {out}/groups.csv "
        f"--summary-output {out}/summary.json"
    )
    if variant == AT_SCALE_MAIN:
        args += f" --decompose-out {out}/decompose.csv --decompose-groups {AT_SCALE_DECOMPOSE}"
    return (f"{LOGS}/at-scale/{variant}.log", args)


# The comm models the job fits and the jitter it measures, before the studies that read them.
AT_SCALE_FITTED = [AT_SCALE_H100, AT_SCALE_NCCL_A100, AT_SCALE_UNIT_JITTER]


def at_scale_model_lines():
    """The `gradsched batch` lines of the fitted models and the unit jitter: the AWS p5 H100
    sweep (16 ranks) scaled to other world sizes by the ring formula; the NCCL model
    fitted on the ABCI A100 2-node sweep, moved to the A100 points' stated interconnect
    (eight 200 Gbit/s NICs per node); the independent per-unit kernel-time jitter of the
    fit (H200) and validation (public) traces."""
    return [
        (
            f"{LOGS}/at-scale/p5-h100.log",
            f"fit --cross-world-size {AT_SCALE_H100_SWEEP} --fit-on 16 --method scaled "
            f"--algorithm ring -o {AT_SCALE_H100}",
        ),
        (
            f"{LOGS}/at-scale/a100-8x200g.log",
            f"fit --cross-world-size {' '.join(AT_SCALE_ABCI_A100)} --fit-on 16 "
            f"--hardware {AT_SCALE_A100_HARDWARE} -o {AT_SCALE_NCCL_A100}",
        ),
        (
            f"{LOGS}/at-scale/unit-jitter.log",
            f"study unit-jitter --fit {' '.join(AT_SCALE_UNIT_JITTER_FIT)} "
            f"--validate {' '.join(AT_SCALE_UNIT_JITTER_VALIDATE)} "
            f"-o {AT_SCALE_UNIT_JITTER}",
        ),
    ]


rule at_scale_study:
    """The fitted models and the unit jitter, then every published point, calibrated
    (smallest count) or predicted, for every variant, and the main variant's
    decomposition, in one `gradsched batch` job (one import of the package; the studies
    share base traces and comm models)."""
    input:
        points=AT_SCALE_POINTS,
        sweeps=[AT_SCALE_H100_SWEEP] + AT_SCALE_ABCI_A100,
        traces=AT_SCALE_UNIT_JITTER_FIT + AT_SCALE_UNIT_JITTER_VALIDATE,
        comm=sorted(
            {f for v in AT_SCALE_VARIANTS for f in at_scale_comm_files(v)}
            - set(AT_SCALE_FITTED)
        ),
    output:
        AT_SCALE_FITTED,
        [
            f"{RESULTS}/at-scale/{v}/{name}"
            for v in AT_SCALE_VARIANTS
            for name in ("points.csv", "groups.csv", "summary.json")
        ],
        decompose=f"{RESULTS}/at-scale/{AT_SCALE_MAIN}/decompose.csv",
    log:
        f"{LOGS}/at-scale/study.batch.log",
    params:
        jobs=batch_lines(
            at_scale_model_lines()
            + [at_scale_study_line(v) for v in AT_SCALE_VARIANTS]
        ),
    shell:
        BATCH


# The tables and macros: steps of `report_batch` (common.smk). Per-group error, perfect
# scaling and growth explained (LaTeX + Markdown + macros).
report_step(
    f"{LOGS}/tables/at-scale.log",
    f"report at-scale --input {RESULTS}/at-scale/{AT_SCALE_MAIN}/points.csv "
    f"--summary {RESULTS}/at-scale/{AT_SCALE_MAIN}/summary.json "
    "--tex {output.tex} --md {output.md} --macros {output.macros}",
    [
        f"{RESULTS}/at-scale/{AT_SCALE_MAIN}/points.csv",
        f"{RESULTS}/at-scale/{AT_SCALE_MAIN}/summary.json",
    ],
    tex=f"{TAB}/at-scale.tex",
    md=f"{TAB}/at-scale.md",
    macros=f"{GEN}/at-scale-macros.tex",
)


# One row per variant: its comm models and switches, and what they give; and the record the
# replay commands quote at multi-node world sizes (the variants of each combination of the
# overlap-slowdown and straggler switches). Its committed copy,
# src/gradsched/experiments/at_scale/record.json, is checked against this one by
# tests/experiments/test_at_scale_record.py.
report_step(
    f"{LOGS}/tables/at-scale-variants.log",
    "report at-scale-variants --summary {input} --tex {output.tex} --md {output.md} "
    "--record {output.record}",
    [f"{RESULTS}/at-scale/{v}/summary.json" for v in AT_SCALE_VARIANTS],
    tex=f"{TAB}/at-scale-variants.tex",
    md=f"{TAB}/at-scale-variants.md",
    record=f"{RESULTS}/at-scale/record.json",
)


# One row per effect of scale: cause, calibration data, value, fit and validation.
report_step(
    f"{LOGS}/tables/at-scale-effects.log",
    "report at-scale-effects --overlap-model src/gradsched/costmodel/overlap_slowdown.json "
    f"--stragglers {RESULTS}/stragglers/stragglers.csv "
    f"--unit-jitter {AT_SCALE_UNIT_JITTER} --tex {{output.tex}} --md {{output.md}}",
    [
        "src/gradsched/costmodel/overlap_slowdown.json",
        f"{RESULTS}/stragglers/stragglers.csv",
        AT_SCALE_UNIT_JITTER,
    ],
    tex=f"{TAB}/at-scale-effects.tex",
    md=f"{TAB}/at-scale-effects.md",
)


# What the main variant's predicted points would need for their published steps.
report_step(
    f"{LOGS}/tables/at-scale-decompose.log",
    f"report at-scale-decompose --input {RESULTS}/at-scale/{AT_SCALE_MAIN}/decompose.csv "
    f"--points {RESULTS}/at-scale/{AT_SCALE_MAIN}/points.csv "
    "--tex {output.tex} --md {output.md} --macros {output.macros}",
    [
        f"{RESULTS}/at-scale/{AT_SCALE_MAIN}/decompose.csv",
        f"{RESULTS}/at-scale/{AT_SCALE_MAIN}/points.csv",
    ],
    tex=f"{TAB}/at-scale-decompose.tex",
    md=f"{TAB}/at-scale-decompose.md",
    macros=f"{GEN}/at-scale-decompose-macros.tex",
)
