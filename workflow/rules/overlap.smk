# Stage: what overlap costs the GPU. Compute kernels with and without an NCCL kernel beside
# them in public Kineto traces (data/external/hta, data/external/param): the per-generation
# slowdown fitted on some traces and validated on the others (gradsched study
# overlap-slowdown), its summary CSV and the paper table (in `all` through TABLES). The
# committed model the replays apply (src/gradsched/costmodel/overlap_slowdown.json) is the
# same command's --model-out on the same sources.

HTA = "data/external/hta"
OVERLAP_SOURCES = [
    ("A100", "fit", "all", f"{HTA}/nccl_parser_config/nccl_data.json.gz"),
    ("A100", "validation", "all", f"{HTA}/trace_diff/control/control.json.gz"),
    (
        "A100",
        "validation",
        "all",
        f"{HTA}/negative_queue_length_values_check/rank0.json.gz",
    ),
    ("V100", "fit", "first-half", f"{HTA}/trace_diff/test/test.json.gz"),
    ("V100", "validation", "second-half", f"{HTA}/trace_diff/test/test.json.gz"),
    ("V100", "validation", "all", "data/external/param/dlrm_kineto.tar.gz"),
]

TABLES.append("overlap-slowdown")


rule overlap_slowdown:
    """The overlap slowdown per GPU generation, fitted and validated on kept-apart traces."""
    input:
        sorted({s[3] for s in OVERLAP_SOURCES}),
    output:
        summary=f"{RESULTS}/overlap/overlap-slowdown.csv",
        model=f"{RESULTS}/overlap/overlap-slowdown-model.json",
        groups=f"{RESULTS}/overlap/overlap-slowdown-groups.csv",
    log:
        f"{LOGS}/overlap/overlap-slowdown.log",
    params:
        sources=" ".join(
            f"--source {g} {r} {p} {shlex.quote(t)}" for g, r, p, t in OVERLAP_SOURCES
        ),
    shell:
        "{GS} study overlap-slowdown {params.sources} --model-out {output.model} "
        "--groups-out {output.groups} -o {output.summary} > {log} 2>&1"


report_step(
    f"{LOGS}/tables/overlap-slowdown.log",
    "report overlap-slowdown-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'Compute slowdown beside NCCL kernels'",
    [f"{RESULTS}/overlap/overlap-slowdown.csv"],
    tex=f"{TAB}/overlap-slowdown.tex",
    md=f"{TAB}/overlap-slowdown.md",
)


# The overlap slowdown's numbers for the prose (paper/sections/overlap-slowdown.tex).
report_step(
    f"{LOGS}/paper/overlap-macros.log",
    "report overlap-slowdown-macros --input {input} -o {output.tex}",
    [f"{RESULTS}/overlap/overlap-slowdown.csv"],
    tex=f"{GEN}/overlap-macros.tex",
)
