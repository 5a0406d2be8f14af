# Stage: gradient compression (gradsched.compression): dense all-reduce, top-k with
# residuals and momentum correction by all-gather (Lin et al., ICLR 2018), and
# importance-weighted pruning with a shared index set on ring all-reduce (Cheng & Xu).
#
# The committed results under paper/data/compression/ (curves.csv, summary.csv,
# settings.json; measured by `gradsched compress train` on 4 gloo ranks) are the inputs of
# the figures and the table: target `compression` (add COMPRESSION_OUTPUTS to `all`).
# Re-running the training is the separate target `compression_run` (`snakemake
# compression_run`; not in `all`: about 10-20 minutes of several CPU cores, and its
# wall-clock numbers depend on the machine).
#
# Include from the Snakefile and add COMPRESSION_OUTPUTS to `all`:
#     include: "workflow/rules/compression.smk"
#     rule all: input: ..., COMPRESSION_OUTPUTS

COMP_DIR = "paper/data/compression"
COMP_FIGURES = ["accuracy-vs-step", "accuracy-vs-time", "bytes"]
COMP_TABLES = ["summary"]
COMP_TRAIN_ARGS = (
    "--world-size 4 --methods dense,topk,importance --densities 1/16,1/64,1/256 "
    "--seeds 0,1,2 --steps 400 --eval-every 20"
)

# The committed paper/data/compression/profile.csv was measured with these arguments.
COMP_PROFILE_ARGS = (
    "--methods dense,topk,importance,gtopk --densities 1/16,1/64,1/256 --world-size 4 "
    "--sizes 1K,4K,16K,64K,256K,1M,4M --reps 9"
)

COMPRESSION_OUTPUTS = [
    f"{FIG}/compression-{name}.{ext}" for name in COMP_FIGURES for ext in ("pdf", "png")
] + [f"{TAB}/compression-{name}.{ext}" for name in COMP_TABLES for ext in ("tex", "md")]


rule compression:
    """Figures and table of the compression experiment, from the committed results."""
    input:
        COMPRESSION_OUTPUTS,


rule compression_report:
    """Accuracy vs step and vs wall-clock (mean +- std over seeds), bytes per step, table."""
    input:
        curves=f"{COMP_DIR}/curves.csv",
        summary=f"{COMP_DIR}/summary.csv",
    output:
        [f"{FIG}/compression-{name}.pdf" for name in COMP_FIGURES]
        + [
            reported(
                f"{FIG}/compression-{name}.png", f"compression-{name}", "Compression"
            )
            for name in COMP_FIGURES
        ]
        + [f"{TAB}/compression-{name}.tex" for name in COMP_TABLES]
        + [
            reported(
                f"{TAB}/compression-{name}.md", f"compression-{name}", "Compression"
            )
            for name in COMP_TABLES
        ],
    log:
        f"{LOGS}/compression/report.log",
    shell:
        "{GS} compress report --input {COMP_DIR} --figdir {FIG} --tabdir {TAB} > {log} 2>&1"


rule compression_run:
    """Re-run the real training (4 gloo ranks on loopback; not in `all`). Rewrites the
    committed results in COMP_DIR (review the diff before committing); the committed files
    are deliberately no rule's output, so `all` never re-trains. The stamp records the run.
    """
    output:
        f"{RESULTS}/compression/train.stamp",
    log:
        f"{LOGS}/compression/train.log",
    shell:
        "{GS} compress train {COMP_TRAIN_ARGS} -o {COMP_DIR} > {log} 2>&1 && "
        "date -u +%Y-%m-%dT%H:%M:%SZ > {output}"


rule compression_profile:
    """The compressors' own compute time per bucket size on this machine (for the replay's
    CompressedCommModel); not in `all`. Writes a fresh file under results/ (the committed
    one is paper/data/compression/profile.csv)."""
    output:
        f"{RESULTS}/compression/profile.csv",
    log:
        f"{LOGS}/compression/profile.log",
    shell:
        "{GS} compress profile {COMP_PROFILE_ARGS} -o {output} > {log} 2>&1"
