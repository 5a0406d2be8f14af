# Stage: sharded data parallelism (FSDP2 units and prefetch). The config's `sharded_replay`
# replays every sharded planner and the exact optimum per case (gradsched study sharded):
# one CSV and the sharded table (in `all` through TABLES). Seconds and bytes.


def sharded_cases():
    """(name, compute CSV, network, comm, P, semantics) of config `sharded_replay`."""
    out = []
    for case in (config.get("sharded_replay") or {}).get("cases", []):
        out.append(
            (
                case["compute"],
                compute_path(case["compute"]),
                case["network"],
                case["comm"],
                int(case["world_size"]),
                case.get("semantics", "streams"),
            )
        )
    return out


def sharded_args():
    return " ".join(
        f"--case {shlex.quote(name)} {shlex.quote(csv)} {shlex.quote(network)} "
        f"{shlex.quote(comm)} {world} {semantics}"
        for name, csv, network, comm, world, semantics in sharded_cases()
    )


if sharded_cases():
    TABLES.append("sharded")


rule sharded_replay:
    """Every sharded planner and the optimum on every configured case."""
    input:
        sorted({p for c in sharded_cases() for p in (c[1], c[3])}),
    output:
        f"{RESULTS}/sharded/sharded.csv",
    log:
        f"{LOGS}/sharded/sharded.log",
    params:
        args=sharded_args(),
    shell:
        "{GS} study sharded {params.args} -o {output} > {log} 2>&1"


report_step(
    f"{LOGS}/tables/sharded.log",
    "report sharded-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'Sharded data parallelism, replayed'",
    [f"{RESULTS}/sharded/sharded.csv"],
    tex=f"{TAB}/sharded.tex",
    md=f"{TAB}/sharded.md",
)


# The committed sharded re-execution (gradsched shard measure, one folder per case under
# paper/data/sharded/; re-measuring needs root for the emulated cluster and is not in `all`).
# Any plans a case ran are rows; the table and macros read the baselines (fsdp2,
# fsdp2-noreshard), the optima (sharded-optimum, sharded-optimum-capped) and the peak columns
# where present. Every case must have the same columns (report concat refuses a mix, so
# re-measure all cases with one version).
SHARDED_MEASURED = sorted(glob.glob("paper/data/sharded/*/measured.csv"))

if SHARDED_MEASURED:
    TABLES.append("sharded-measured")


# The committed measured.csv of every sharded case, in one CSV.
if SHARDED_MEASURED:
    report_step(
        f"{LOGS}/sharded/measured-collect.log",
        "report concat {input} -o {output.csv}",
        SHARDED_MEASURED,
        csv=f"{RESULTS}/sharded/measured.csv",
    )


if SHARDED_MEASURED:
    report_step(
        f"{LOGS}/tables/sharded-measured.log",
        "report sharded-measured-table --input {input} --tex {output.tex} "
        "--md {output.md} --title 'Sharded plans run with stock FSDP2'",
        [f"{RESULTS}/sharded/measured.csv"],
        tex=f"{TAB}/sharded-measured.tex",
        md=f"{TAB}/sharded-measured.md",
    )
