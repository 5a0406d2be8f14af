# Stage: collectives at scale. The two-level NCCL model (gradsched.costmodel.nccl) and the
# formula methods, each fitted on the smallest multi-node sweep of every public multi-scale
# NCCL series, predict the other node counts (leave-world-sizes-out); one table.

NCCL_SERIES = {
    "abci-a100": {
        "traces": [
            f"traces/comm/external/nccl-abci-inter-anode-{n}.csv" for n in (2, 4, 8, 16)
        ],
        "fit_on": 16,
    },
    "abci-v100": {
        "traces": [
            f"traces/comm/external/nccl-abci-inter-vnode-{n}.csv"
            for n in (2, 4, 8, 16, 32)
        ],
        "fit_on": 8,
    },
}
NCCL_METHODS = {
    "ring-analytic": "--method analytic --algorithm ring",
    "ring-scaled": "--method scaled --algorithm ring",
    "nccl-no-fabric": "--method nccl --fabric none",
    "nccl": "",
}
NCCL_OUTPUTS = [
    f"{RESULTS}/nccl/validation.tex",
    f"{RESULTS}/nccl/validation.md",
]


# The models the at-scale predictions use: the NCCL model fitted on the ABCI A100 series'
# smallest scale (2 nodes; its measured extrapolation error to 4-16 nodes recorded in the JSON),
# as measured (A100) and moved to an HGX H100 node with eight 400 Gbit/s NICs (H100, H200:
# nothing measured there, every world size an extrapolation).
NCCL_MODELS = {
    "abci-a100": "",
    "h100-8x400g": "--hardware h100-8x400g",
}


rule nccl_crossws:
    """Each method fitted on each series' smallest scale (MAPE per world size), one CSV per
    method, and the NCCL model of each machine (JSON): one job."""
    input:
        sorted({t for series in NCCL_SERIES.values() for t in series["traces"]}),
    output:
        [
            f"{RESULTS}/nccl/crossws/{series}.{method}.csv"
            for method in NCCL_METHODS
            for series in NCCL_SERIES
        ],
        [f"{RESULTS}/nccl/{method}.csv" for method in NCCL_METHODS],
        [f"{RESULTS}/nccl/models/{machine}.json" for machine in NCCL_MODELS],
    log:
        f"{LOGS}/nccl/crossws.batch.log",
    params:
        jobs=batch_lines(
            [
                (
                    f"{LOGS}/nccl/crossws/{series}.{method}.log",
                    f"fit --cross-world-size {' '.join(spec['traces'])} "
                    f"--fit-on {spec['fit_on']} {flags} "
                    f"--table {RESULTS}/nccl/crossws/{series}.{method}.csv",
                )
                for method, flags in NCCL_METHODS.items()
                for series, spec in NCCL_SERIES.items()
            ]
            + [
                (
                    f"{LOGS}/nccl/{method}.log",
                    "report concat "
                    + " ".join(
                        f"{RESULTS}/nccl/crossws/{series}.{method}.csv"
                        for series in NCCL_SERIES
                    )
                    + f" -o {RESULTS}/nccl/{method}.csv",
                )
                for method in NCCL_METHODS
            ]
            + [
                (
                    f"{LOGS}/nccl/models/{machine}.log",
                    "fit --cross-world-size "
                    f"{' '.join(NCCL_SERIES['abci-a100']['traces'])} "
                    f"--fit-on {NCCL_SERIES['abci-a100']['fit_on']} {flags} "
                    f"-o {RESULTS}/nccl/models/{machine}.json",
                )
                for machine, flags in NCCL_MODELS.items()
            ]
        ),
    shell:
        BATCH


rule nccl_validation:
    """The validation table (results/nccl/validation.{tex,md}; the paper's copy is
    paper/tables/collectives-at-scale.tex)."""
    input:
        expand(f"{RESULTS}/nccl/{{method}}.csv", method=NCCL_METHODS),
    output:
        tex=f"{RESULTS}/nccl/validation.tex",
        md=f"{RESULTS}/nccl/validation.md",
        paper=f"{TAB}/collectives-at-scale.tex",
    log:
        f"{LOGS}/nccl/validation.log",
    params:
        cases=" ".join(f"--case {m} {RESULTS}/nccl/{m}.csv" for m in NCCL_METHODS),
    shell:
        "{GS} report collectives-at-scale-table {params.cases} --tex {output.tex} "
        "--md {output.md} --title 'Collectives at scale: MAPE per world size' > {log} 2>&1 "
        "&& cp {output.tex} {output.paper}"
