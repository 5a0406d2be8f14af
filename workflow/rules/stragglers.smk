# Stage: stragglers. Every synchronising collective waits for the slowest of P ranks: the
# ranks' compute variation measured on the committed H200 data (between processes, between
# iterations), fitted per device class and validated on the eight ranks of PARAM's public
# DLRM step (gradsched study stragglers): two CSVs and two tables (in `all` through TABLES).

STRAGGLERS_H200 = "data/h200"
STRAGGLERS_DLRM = "data/external/param/dlrm_kineto.tar.gz"
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
    output:
        csv=f"{RESULTS}/stragglers/stragglers.csv",
        ep=f"{RESULTS}/stragglers/stragglers-ep.csv",
        tables=table_files(["stragglers", "stragglers-ep"]),
    log:
        f"{LOGS}/stragglers/stragglers.log",
    shell:
        "{GS} study stragglers --h200 {STRAGGLERS_H200} --traces traces/compute/h200 "
        "--dlrm {input.dlrm} -o {output.csv} --ep {output.ep} --tables {TAB} "
        "> {log} 2>&1"
