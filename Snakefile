# gradsched pipeline: traces -> cost models -> replay -> figures, tables, macros -> paper.
# Thin on purpose: configuration, validation, includes and the target rules. Every step is a
# `gradsched` sub-command (see workflow/rules/*.smk). Run: make reproduce (= target all).

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/import.smk"
include: "workflow/rules/fit.smk"
include: "workflow/rules/nccl.smk"
include: "workflow/rules/replay.smk"
include: "workflow/rules/extrapolate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/tables.smk"
# Two-level topologies: flat vs hierarchical replay table (in `all` via TABLES; before paper).
include: "workflow/rules/topology.smk"
# All-reduce vs parameter servers: the ps-replay table (in `all` via TABLES; before paper).
include: "workflow/rules/ps.smk"
# Sharded data parallelism (FSDP2 units and prefetch): the sharded table (in `all` via TABLES).
include: "workflow/rules/sharded.smk"
include: "workflow/rules/sharded_dtypes.smk"
include: "workflow/rules/fsdp_rival.smk"
# Stragglers: measured cv, fits, validation and e_P tables (in `all` via TABLES).
include: "workflow/rules/stragglers.smk"
# What overlap costs the GPU: the overlap-slowdown table (in `all` via TABLES; before paper).
include: "workflow/rules/overlap.smk"
# Diagnose: observed vs predicted overlap, planted faults (in `all` via TABLES).
include: "workflow/rules/diagnose.smk"
include: "workflow/rules/paper.smk"
# Collective algorithms: figures/tables from the committed sweeps are in `all`;
# re-measuring (`collectives_measure`) is not.
include: "workflow/rules/collectives.smk"
# Gradient compression: figures/table from the committed training results are in `all`;
# re-training (`compression_run`) and profiling (`compression_profile`) are not.
include: "workflow/rules/compression.smk"
# Hardware tier (never in `all`): capture compute traces, collective sweeps, profiled
# iterations on CPU, the emulated cluster (root) or GPUs (profiles/slurm).
include: "workflow/rules/capture.smk"
# Re-execution: the figure/table of the committed measurements are in `all`; re-measuring
# (`reexec`, root for the emulated cluster) is not.
include: "workflow/rules/reexec.smk"
# Advice on a committed case (`sm advise`, replay only; not in `all`).
include: "workflow/rules/advise.smk"
include: "workflow/rules/at_scale.smk"
# Which device mesh: FSDP vs reshard-to-node vs HSDP at 64-512 H100s (in `all` via TABLES).
include: "workflow/rules/hsdp.smk"
# The report steps the stages registered (report_step), in one job: after every include.
include: "workflow/rules/report_batch.smk"


# Every job imports gradsched: its modules are compiled once, here, not in every job. A
# module without an up-to-date .pyc is compiled by each process that imports it, and none
# writes one where PYTHONDONTWRITEBYTECODE is set (0.1-0.2 CPU-s a job; compileall writes
# them regardless). Not on dry runs (Snakemake runs no onstart there).
onstart:
    shell(
        f"{GS.removesuffix(' -m gradsched')} -c 'import compileall, gradsched; "
        "compileall.compile_dir(gradsched.__path__[0], quiet=2)'"
    )


rule all:
    """Everything that needs no GPU and no root (the default target)."""
    default_target: True
    input:
        f"{RESULTS}/validate/traces.txt",
        figure_files(),
        table_files(),
        f"{GEN}/macros.tex",
        f"{GEN}/claims.md",
        COLLECTIVES_OUTPUTS,
        COMPRESSION_OUTPUTS,
        reexec_files(),
        PAPER_TARGET,


rule smoke:
    """One trace on one network, a few algorithms, one figure (< 2 minutes)."""
    input:
        f"{RESULTS}/replay/smoke/replay.csv",
        f"{RESULTS}/smoke/replay-vs-world-size.pdf",
        f"{RESULTS}/smoke/replay-vs-world-size.png",


rule replay:
    """Every configured case with every configured algorithm."""
    input:
        f"{RESULTS}/replay/main/replay.csv",


rule figures:
    input:
        figure_files(),


rule tables:
    input:
        table_files(),


rule paper:
    """Figures, tables, macros and (when latexmk is installed) paper/main.pdf."""
    input:
        figure_files(),
        table_files(),
        f"{GEN}/macros.tex",
        PAPER_TARGET,


rule compare:
    """Reproduced vs published numbers, with their stated tolerances."""
    input:
        f"{RESULTS}/compare/compare.csv",
        f"{TAB}/compare.tex",
        f"{TAB}/compare.md",
