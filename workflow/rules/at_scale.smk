# Stage: end to end at scale (in `all` via TABLES). Published throughput of pure FSDP
# training at several GPU counts (data/external/at-scale/points.csv, 35 groups), calibrated
# on the smallest count of each group (one utilisation), every other count predicted with
# the FSDP2 replay of the FLOPs model's trace. Comm models, one per GPU type, all proxies
# (measured on other clusters than the published runs): A100 = the ABCI A100 cross-world-size
# model (extrapolate.smk, fitted at 32 and 128 ranks); H100 and H200 = the GCP A3-Mega 2 x 8
# H100 all-reduce sweep, scaled by the ring formula from its one world size (16). Seconds.
AT_SCALE_POINTS = "data/external/at-scale/points.csv"
AT_SCALE_H100_SWEEP = "traces/comm/external/nccl-gcp-a3mega-2x8-h100-allreduce.csv"
TABLES.append("at-scale")


rule at_scale_h100_model:
    """The A3-Mega H100 sweep (16 ranks) scaled to other world sizes by the ring formula."""
    input:
        AT_SCALE_H100_SWEEP,
    output:
        f"{RESULTS}/at-scale/a3mega-h100.scaled.json",
    log:
        f"{LOGS}/at-scale/a3mega-h100.log",
    shell:
        "{GS} fit --cross-world-size {input} --fit-on 16 --method scaled --algorithm ring "
        "-o {output} > {log} 2>&1"


rule at_scale_study:
    """Every published point: calibrated (smallest count) or predicted, with perfect scaling."""
    input:
        points=AT_SCALE_POINTS,
        a100=f"{RESULTS}/extrapolate/abci-a100-ib.scaled.json",
        h100=rules.at_scale_h100_model.output,
    output:
        points=f"{RESULTS}/at-scale/points.csv",
        groups=f"{RESULTS}/at-scale/groups.csv",
        summary=f"{RESULTS}/at-scale/summary.json",
    log:
        f"{LOGS}/at-scale/study.log",
    shell:
        "{GS} study at-scale --points {input.points} --comm a100={input.a100} "
        "--comm h100={input.h100} --comm h200={input.h100} -o {output.points} "
        "--groups-output {output.groups} --summary-output {output.summary} > {log} 2>&1"


rule table_at_scale:
    """Per-point error, perfect scaling and growth explained (LaTeX + Markdown + macros)."""
    input:
        points=rules.at_scale_study.output.points,
        summary=rules.at_scale_study.output.summary,
    output:
        tex=f"{TAB}/at-scale.tex",
        md=f"{TAB}/at-scale.md",
        macros=f"{GEN}/at-scale-macros.tex",
    log:
        f"{LOGS}/tables/at-scale.log",
    shell:
        "{GS} report at-scale --input {input.points} --summary {input.summary} "
        "--tex {output.tex} --md {output.md} --macros {output.macros} > {log} 2>&1"
