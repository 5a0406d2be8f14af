# Stage: stragglers. Every synchronising collective waits for the slowest of P ranks: the
# ranks' compute variation measured on the committed H200 data (between processes, between
# iterations), fitted per device class and validated on the eight ranks of PARAM's public
# DLRM step (gradsched study stragglers): two CSVs and two tables (in `all` through TABLES).

STRAGGLERS_H200 = "data/h200"
STRAGGLERS_DLRM = "data/external/param/dlrm_kineto.tar.gz"
# public Kineto traces with three or more profiler steps (step-to-step variation)
STRAGGLERS_STEPS = [
    "data/external/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "data/external/kineto/worker0.1623143089861.pt.trace.json.gz",
    "data/external/hta/nccl_parser_config/nccl_data.json.gz",
    "data/external/hta/trace_diff/control/control.json.gz",
    "data/external/hta/trace_diff/test/test.json.gz",
]
TABLES += ["stragglers", "stragglers-ep"]


rule stragglers:
    """Measured cv per source and class, the fits, their validation, and e_P."""
    input:
        h200=[
            f"{STRAGGLERS_H200}/kineto-steps/kineto-steps-summary.json",
            f"{STRAGGLERS_H200}/kineto/kineto-truth-summary.json",
            f"{STRAGGLERS_H200}/kineto-import-report.csv",
            *sorted(glob.glob(f"{STRAGGLERS_H200}/gpu-check/*.tar.gz")),
        ],
        traces=sorted(glob.glob("traces/compute/h200/*.meta.json")),
        dlrm=STRAGGLERS_DLRM,
        steps=STRAGGLERS_STEPS,
    output:
        csv=f"{RESULTS}/stragglers/stragglers.csv",
        ep=f"{RESULTS}/stragglers/stragglers-ep.csv",
        tables=table_files(["stragglers", "stragglers-ep"]),
    log:
        f"{LOGS}/stragglers/stragglers.log",
    shell:
        "{GS} study stragglers --h200 {STRAGGLERS_H200} --traces traces/compute/h200 "
        "--dlrm {input.dlrm} --step-traces {input.steps} -o {output.csv} "
        "--ep {output.ep} --tables {TAB} "
        "> {log} 2>&1"
