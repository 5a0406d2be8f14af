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


rule nccl_crossws:
    """One method fitted on the smallest scale of one series; MAPE per world size."""
    input:
        lambda wc: NCCL_SERIES[wc.series]["traces"],
    output:
        f"{RESULTS}/nccl/crossws/{{series}}.{{method}}.csv",
    log:
        f"{LOGS}/nccl/crossws/{{series}}.{{method}}.log",
    wildcard_constraints:
        series="|".join(NCCL_SERIES),
        method="|".join(NCCL_METHODS),
    params:
        fit_on=lambda wc: NCCL_SERIES[wc.series]["fit_on"],
        method=lambda wc: NCCL_METHODS[wc.method],
    shell:
        "{GS} fit --cross-world-size {input} --fit-on {params.fit_on} {params.method} "
        "--table {output} > {log} 2>&1"


rule nccl_method:
    """One method's tables of every series in one CSV."""
    input:
        expand(
            f"{RESULTS}/nccl/crossws/{{series}}.{{{{method}}}}.csv", series=NCCL_SERIES
        ),
    output:
        f"{RESULTS}/nccl/{{method}}.csv",
    log:
        f"{LOGS}/nccl/{{method}}.log",
    wildcard_constraints:
        method="|".join(NCCL_METHODS),
    shell:
        "{GS} report concat {input} -o {output} > {log} 2>&1"


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


# The models the at-scale predictions use: the NCCL model fitted on the ABCI A100 series'
# smallest scale (2 nodes; its measured extrapolation error to 4-16 nodes recorded in the JSON),
# as measured (A100) and moved to an HGX H100 node with eight 400 Gbit/s NICs (H100, H200:
# nothing measured there, every world size an extrapolation).
NCCL_MODELS = {
    "abci-a100": "",
    "h100-8x400g": "--hardware h100-8x400g",
}


rule nccl_model:
    """The NCCL model of one machine, calibrated on the ABCI A100 2-node sweep (JSON)."""
    input:
        NCCL_SERIES["abci-a100"]["traces"],
    output:
        f"{RESULTS}/nccl/models/{{machine}}.json",
    log:
        f"{LOGS}/nccl/models/{{machine}}.log",
    wildcard_constraints:
        machine="|".join(NCCL_MODELS),
    params:
        fit_on=NCCL_SERIES["abci-a100"]["fit_on"],
        hardware=lambda wc: NCCL_MODELS[wc.machine],
    shell:
        "{GS} fit --cross-world-size {input} --fit-on {params.fit_on} {params.hardware} "
        "-o {output} > {log} 2>&1"
