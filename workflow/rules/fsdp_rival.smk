# Stage: FSDP2's gradient-accumulation modes and the sharded optimum against PyTorch's
# FSDP-unit MILP (a reconstruction; gradsched shard accumulate / shard rival), on the CPU
# cases of `sharded_replay` (sharded.smk). The MILP is solved with CBC at the original's
# 180 s limit: on the BERT trace (182 modules) it reaches that limit, so the rival runs on
# the ResNet-18 cases only. Both tables are in `all` through TABLES. Seconds and bytes.

ACCUM_K = 4


def rival_cases():
    """(compute name, csv, network, comm, P, semantics) of the CPU sharded cases (the
    rival's collect keeps the ResNet-18 ones, see above)."""
    return [c for c in sharded_cases() if c[5] == "blocking"]


MEASURED_RIVAL_CASE = (
    "resnet18-cpu-b4",
    "traces/compute/cpu/resnet18-b4-cpu-fp32.csv",
    "cpu-gloo-loopback",
    "traces/comm/cpu/gloo-loopback-p2.csv",
    2,
    "blocking",
)
"""The case whose rival plans were run (paper/data/sharded-rival/resnet18-b4-p2-loopback)."""


def rival_case(name, network):
    return next(
        c
        for c in [*rival_cases(), MEASURED_RIVAL_CASE]
        if c[0] == name and c[2] == network
    )


if rival_cases():
    TABLES += ["accumulation-modes", "fsdp-rival"]


ACCUM_RUN = [(c, hsdp) for hsdp in (False, True) for c in rival_cases()]
"""(case, HSDP?) of the accumulation replays: FSDP2's modes on each case's P ranks, then
HSDP's three on a 2 x 2 mesh (4 ranks, shard groups and replicate groups of 2, each priced by
the case's 2-rank sweep: every rank has its own shaped link)."""


def accumulate_csv(case, hsdp):
    kind = "accumulate-hsdp" if hsdp else "accumulate"
    return f"{RESULTS}/sharded/{kind}/{case[0]}--{case[2]}.csv"


rule shard_accumulate_cases:
    """The accumulation modes of ACCUM_RUN at ACCUM_K micro-batches per step, FSDP2's
    default units: one job."""
    input:
        sorted({p for c in rival_cases() for p in (c[1], c[3])}),
    output:
        [accumulate_csv(c, h) for c, h in ACCUM_RUN],
    log:
        f"{LOGS}/sharded/accumulate.batch.log",
    params:
        jobs=batch_lines(
            (
                f"{LOGS}/sharded/accumulate{'-hsdp' if h else ''}-{c[0]}--{c[2]}.log",
                f"shard accumulate --compute {c[1]} --comm {c[3]} "
                + ("--world-size 4 --mesh 2x2 " if h else f"--world-size {c[4]} ")
                + f"--semantics {c[5]} --grad-accum {ACCUM_K} -o {accumulate_csv(c, h)}",
            )
            for c, h in ACCUM_RUN
        ),
    shell:
        BATCH


RIVAL_RUN = [
    c for c in [*rival_cases(), MEASURED_RIVAL_CASE] if c[0].startswith("resnet18")
]
"""The cases the rival is solved on (the collect keeps the ResNet-18 ones, see above)."""


rule shard_rival_case:
    """The optimum, FSDP2's defaults and the FSDP-unit MILP, uncapped and under FSDP2's
    peak, on each case: one job (CBC's solves dominate; one interpreter)."""
    input:
        sorted({p for c in RIVAL_RUN for p in (c[1], c[3])}),
    output:
        [f"{RESULTS}/sharded/rival/{c[0]}--{c[2]}.csv" for c in RIVAL_RUN],
    log:
        f"{LOGS}/sharded/rival.batch.log",
    params:
        jobs=batch_lines(
            (
                f"{LOGS}/sharded/rival-{c[0]}--{c[2]}.log",
                f"shard rival --compute {c[1]} --comm {c[3]} --world-size {c[4]} "
                f"--semantics {c[5]} -o {RESULTS}/sharded/rival/{c[0]}--{c[2]}.csv",
            )
            for c in RIVAL_RUN
        ),
    shell:
        BATCH


report_step(
    f"{LOGS}/sharded/accumulate-collect.log",
    "report concat {input} -o {output.csv}",
    [accumulate_csv(c, h) for c, h in ACCUM_RUN],
    csv=f"{RESULTS}/sharded/accumulate.csv",
)


report_step(
    f"{LOGS}/sharded/rival-collect.log",
    "report concat {input} -o {output.csv}",
    [f"{RESULTS}/sharded/rival/{c[0]}--{c[2]}.csv" for c in RIVAL_RUN],
    csv=f"{RESULTS}/sharded/rival.csv",
)


report_step(
    f"{LOGS}/tables/accumulation-modes.log",
    "report accumulation-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'FSDP2 and HSDP accumulation modes, replayed'",
    [f"{RESULTS}/sharded/accumulate.csv"],
    tex=f"{TAB}/accumulation-modes.tex",
    md=f"{TAB}/accumulation-modes.md",
)


report_step(
    f"{LOGS}/tables/fsdp-rival.log",
    "report fsdp-rival-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'The sharded optimum vs the FSDP-unit MILP'",
    [f"{RESULTS}/sharded/rival.csv"],
    tex=f"{TAB}/fsdp-rival.tex",
    md=f"{TAB}/fsdp-rival.md",
)


# The committed run of the rival plans (paper/data/sharded-rival/<case>/: gradsched shard run
# on a shared VM, see its README; not re-measured in `all`).
RIVAL_MEASURED = sorted(glob.glob("paper/data/sharded-rival/*/iterations.csv"))

if RIVAL_MEASURED:
    TABLES.append("fsdp-rival-measured")


if RIVAL_MEASURED:
    report_step(
        f"{LOGS}/tables/fsdp-rival-measured.log",
        "report fsdp-rival-measured-table --input {input} --tex {output.tex} "
        "--md {output.md} --title 'The rival plans run with stock FSDP2'",
        RIVAL_MEASURED[:1],
        tex=f"{TAB}/fsdp-rival-measured.tex",
        md=f"{TAB}/fsdp-rival-measured.md",
    )
