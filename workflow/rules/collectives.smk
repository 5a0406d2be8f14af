# Stage: collective algorithms over point-to-point (gradsched.collectives).
#
# The committed sweeps under traces/comm/collectives/ are the inputs of the figures and
# tables (targets in `all`: COLLECTIVES_OUTPUTS). Re-measuring them is the separate target
# `collectives_measure` (not in `all`; it writes to results/measured/collectives/, and a
# reviewed sweep is adopted by copying it into traces/comm/collectives/): it needs several CPU cores for minutes, and the
# cluster sweeps need root (network namespaces + tc tbf, gradsched.distributed.cluster).
#
# Include from the Snakefile and add COLLECTIVES_OUTPUTS to `all`:
#     include: "workflow/rules/collectives.smk"
#     rule all: input: ..., COLLECTIVES_OUTPUTS

COLL_DIR = "traces/comm/collectives"  # committed sweeps: inputs only
COLL_MEASURED = (
    f"{RESULTS}/measured/collectives"  # fresh sweeps; copy into COLL_DIR to adopt
)
COLL_WORLD_SIZES = [2, 3, 4]
# sweep name -> (--cluster argument or None, --max-bytes, collective, algorithms,
#                --lp-link alpha,beta,gamma for Wang et al.'s optimal LP chunk b*)
# The LP link parameters are the joint alpha-beta fit of a first sweep of the same network
# on the (shared, loaded) development machine: per-message alpha ~0.7-1.1 ms there.
COLL_SWEEPS = {
    "loopback": (
        None,
        "16M",
        "all_reduce",
        "default,lp,ring,mst,rd,rhd",
        "1.1e-3,2.1e-9,6e-11",
    ),
    "cluster-1gbit": (
        "1gbit",
        "4M",
        "all_reduce",
        "default,lp,ring,mst,rd,rhd",
        "7.2e-4,7.0e-9,6e-11",
    ),
    "cluster-200mbit": (
        "200mbit",
        "4M",
        "all_reduce",
        "default,lp,ring,mst,rd,rhd",
        "8.1e-4,4.1e-8,6e-11",
    ),
    "cluster-200mbit-broadcast": (
        "200mbit",
        "4M",
        "broadcast",
        "default,lp,mst",
        "8.1e-4,4.1e-8,6e-11",
    ),
}
# Reduction cost gamma for the formula fits: `auto` = the bench's own measurement (sidecar
# gamma_s_per_byte_measured: torch add_ of 4 MiB fp32, ~4-7e-11 s/byte on the development
# machine); a number fixes it; `fit` fits it jointly (poorly identified on noisy data).
COLL_GAMMA = "auto"
COLL_FIGURES = ["time-vs-size", "lp-invariance", "lp-rhd-ratio"]
COLL_TABLES = ["summary", "broadcast", "formula-errors"]


def coll_traces():
    """The committed sweeps that exist (a network not measured yet is left out)."""
    out = []
    for net in COLL_SWEEPS:
        for p in COLL_WORLD_SIZES:
            path = f"{COLL_DIR}/{net}-p{p}.csv"
            if Path(path).is_file():
                out.append(path)
    return out


COLL_TUNED_NETS = ("loopback", "cluster-1gbit", "cluster-200mbit")
"""The networks with a tuned cost model (collectives_tuned)."""
COLLECTIVES_OUTPUTS = (
    [
        f"{RESULTS}/collectives/fit.json",
        f"{RESULTS}/collectives/errors.csv",
        *[f"{RESULTS}/collectives/tuned-{net}.json" for net in COLL_TUNED_NETS],
    ]
    + [
        f"{FIG}/collectives-{name}.{ext}"
        for name in COLL_FIGURES
        for ext in ("pdf", "png")
    ]
    + [
        f"{TAB}/collectives-{name}.{ext}"
        for name in COLL_TABLES
        for ext in ("tex", "md")
    ]
)


wildcard_constraints:
    collnet="loopback|cluster-[0-9a-z]+(-broadcast)?",
    collp="[0-9]+",


rule collectives_measure_one:
    """Time every algorithm at one world size on one network (loopback or emulated)."""
    output:
        f"{COLL_MEASURED}/{{collnet}}-p{{collp}}.csv",
    log:
        f"{LOGS}/collectives/measure-{{collnet}}-p{{collp}}.log",
    params:
        cluster=lambda wc: (
            f"--cluster {COLL_SWEEPS[wc.collnet][0]}"
            if COLL_SWEEPS[wc.collnet][0]
            else ""
        ),
        max_bytes=lambda wc: COLL_SWEEPS[wc.collnet][1],
        collective=lambda wc: COLL_SWEEPS[wc.collnet][2],
        algorithms=lambda wc: COLL_SWEEPS[wc.collnet][3],
        lp_link=lambda wc: COLL_SWEEPS[wc.collnet][4],
    shell:
        "{GS} bench collectives --algorithms {params.algorithms} "
        "--collective {params.collective} --world-size {wildcards.collp} --min-bytes 4 "
        "--max-bytes {params.max_bytes} {params.cluster} --lp-link {params.lp_link} "
        "-o {output} > {log} 2>&1"


rule collectives_measure:
    """Re-measure every sweep (not in `all`; the cluster ones need root)."""
    input:
        [
            f"{COLL_MEASURED}/{net}-p{p}.csv"
            for net in COLL_SWEEPS
            for p in COLL_WORLD_SIZES
        ],


rule collectives_fit:
    """alpha-beta-gamma formulas (joint and per algorithm) per network; per-size errors."""
    input:
        coll_traces(),
    output:
        fit=f"{RESULTS}/collectives/fit.json",
        errors=f"{RESULTS}/collectives/errors.csv",
    log:
        f"{LOGS}/collectives/fit.log",
    shell:
        "{GS} bench collectives-fit {input} --gamma {COLL_GAMMA} -o {output.fit} "
        "--errors {output.errors} > {log} 2>&1"


def tuned_traces(net):
    """The committed sweeps of one network (all-reduce and broadcast, every world size)."""
    return [
        t
        for t in coll_traces()
        if Path(t).name.startswith(f"{net}-p")
        or Path(t).name.startswith(f"{net}-broadcast-p")
    ]


rule collectives_tuned:
    """The tuned cost model (fastest algorithm per size) of each network, in one job."""
    input:
        traces=sorted({t for net in COLL_TUNED_NETS for t in tuned_traces(net)}),
        fit=f"{RESULTS}/collectives/fit.json",
    output:
        [f"{RESULTS}/collectives/tuned-{net}.json" for net in COLL_TUNED_NETS],
    log:
        f"{LOGS}/collectives/tuned.batch.log",
    params:
        jobs=lambda wc, input: batch_lines(
            (
                f"{LOGS}/collectives/tuned-{net}.log",
                f"bench collectives-tune {' '.join(tuned_traces(net))} "
                f"--fit {input.fit} -o {RESULTS}/collectives/tuned-{net}.json",
            )
            for net in COLL_TUNED_NETS
        ),
    shell:
        BATCH


rule collectives_report:
    """Figures (measured vs formula; LP vs P; LP/RHD bandwidth) and tables."""
    input:
        traces=coll_traces(),
        fit=f"{RESULTS}/collectives/fit.json",
        errors=f"{RESULTS}/collectives/errors.csv",
    output:
        [f"{FIG}/collectives-{name}.pdf" for name in COLL_FIGURES]
        + [
            reported(
                f"{FIG}/collectives-{name}.png", f"collectives-{name}", "Collectives"
            )
            for name in COLL_FIGURES
        ]
        + [f"{TAB}/collectives-{name}.tex" for name in COLL_TABLES]
        + [
            reported(
                f"{TAB}/collectives-{name}.md", f"collectives-{name}", "Collectives"
            )
            for name in COLL_TABLES
        ],
    log:
        f"{LOGS}/collectives/report.log",
    shell:
        "{GS} bench collectives-report {input.traces} --fit {input.fit} "
        "--errors {input.errors} --figdir {FIG} --tabdir {TAB} > {log} 2>&1"
