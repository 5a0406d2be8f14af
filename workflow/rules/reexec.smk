# Stage: re-execution (hardware tier). Runs every planner's plan for real with gradsched's
# executor (and PyTorch DDP itself) and compares with the replay's prediction.
#
#   sudo ... snakemake --profile profiles/default reexec     re-measure (NOT in `all`;
#       the emulated-cluster cases need root; 7-18 min per ResNet-18 case on the loaded
#       2-core build VM)
#   snakemake ... reexec_figures                          figure + table from the
#       COMMITTED data (paper/data/reexec/measured.csv); `reexec_files()` lists them for
#       `all`.
#
# Configuration: config/reexec.yaml (mapping `reexec`; checked against
# workflow/schemas/reexec.schema.yaml in common.smk; targets and command-line arguments come
# from gradsched.pipeline.reexec): `settings` (algorithms, DDP caps,
# warmup/iters/rounds, threads, backend), `cases` (model, batch_size, world_size, network,
# compute[, comm, name]) and `interference` (backend, networks, world_sizes, kernel,
# comm_bytes, small_bytes, rounds, reps). A case's comm model defaults to traces/comm/cpu/gloo-<network>-p<P>.csv.
# To publish a re-measurement: copy results/reexec/{measured.csv,iterations.csv,
# provenance.json,interference-*-p*.json} to paper/data/reexec/ and commit.

REEXEC_DATA = "paper/data/reexec"
REEXEC_OUT = f"{RESULTS}/reexec"
REEXEC = REEXEC_FILE.get("reexec") or {}

# the accumulation / ZeRO-1 case set (its rules at the end of this file)
REEXEC_ACCUM_CONFIG = reexec_stage.ACCUM_CONFIG
REEXEC_ACCUM_FILE = _config_file(REEXEC_ACCUM_CONFIG, "../schemas/reexec.schema.yaml")
REEXEC_ACCUM = REEXEC_ACCUM_FILE.get("reexec") or {}
REEXEC_ACCUM_OUT = f"{RESULTS}/reexec-accum"
REEXEC_ACCUM_DATA = "paper/data/reexec-accum"


def _accum_cases():
    from gradsched.reexec.config import parse_cases

    return parse_cases(REEXEC_ACCUM.get("cases") or [], REEXEC_ACCUM_CONFIG)


def reexec_accum_files():
    """Tables and macros of the committed accumulation data (none before they exist)."""
    return reexec_stage.accum_committed_files(TAB, GEN, RESULTS, REEXEC_ACCUM_DATA)


def reexec_cases():
    """Case names of config/reexec.yaml (the CLI's naming rule, checked by the CLI)."""
    return [c.name for c in _parsed_cases()]


def _parsed_cases():
    from gradsched.reexec.config import parse_cases

    return parse_cases(REEXEC.get("cases") or [], REEXEC_CONFIG)


def _case_interference(wc):
    """The interference JSON the `best` planner of this case scores with."""
    return checked(
        reexec_stage.case_interference,
        REEXEC,
        _parsed_cases(),
        wc.case,
        REEXEC_OUT,
        REEXEC_CONFIG,
    )


def _interference_args(wc):
    return checked(reexec_stage.interference_args, REEXEC, wc.network, wc.world)


def reexec_calibration_files():
    """The interference JSON of every calibrated (network, world size)."""
    return checked(reexec_stage.calibration_files, REEXEC, REEXEC_OUT, REEXEC_CONFIG)


def reexec_files():
    """Figure and table drawn from the committed data (for the lead's `all`), and the
    accumulation / ZeRO-1 tables once their measurements are committed."""
    return reexec_stage.committed_files(FIG, TAB, RESULTS) + reexec_accum_files()


rule reexec:
    """Re-measure every case, calibrate interference, predict, analyse (not in `all`)."""
    input:
        f"{REEXEC_OUT}/measured.csv",
        f"{REEXEC_OUT}/stats.csv",
        f"{REEXEC_OUT}/reexec.pdf",


rule reexec_figures:
    """Figure and table of the committed re-execution data."""
    input:
        reexec_files(),


rule reexec_run:
    """One case: plans (best scores with the calibrated interference), executor runs,
    PyTorch DDP, compute-only control (rounds)."""
    input:
        interference=_case_interference,
    output:
        iterations=f"{REEXEC_OUT}/{{case}}/iterations.csv",
        meta=f"{REEXEC_OUT}/{{case}}/meta.json",
    log:
        f"{LOGS}/reexec/{{case}}.log",
    wildcard_constraints:
        case="[A-Za-z0-9][A-Za-z0-9_.-]*",
    threads: workflow.cores  # measurements run alone, never side by side
    resources:
        runtime=120,
    shell:
        "{GS} reexec run --config {REEXEC_CONFIG} --case {wildcards.case} "
        "--interference {input.interference} -o {REEXEC_OUT} > {log} 2>&1"


rule reexec_interference:
    """Interference on this machine (one network, one world size): per-collective compute
    cost and compute / communication slowdowns."""
    output:
        f"{REEXEC_OUT}/interference-{{network}}-p{{world}}.json",
    log:
        f"{LOGS}/reexec/interference-{{network}}-p{{world}}.log",
    wildcard_constraints:
        network=reexec_stage.NETWORK_PATTERN,
        world="[0-9]+",
    threads: workflow.cores
    resources:
        runtime=30,
    params:
        args=_interference_args,
    shell:
        "{GS} reexec interference {params.args} -o {output} > {log} 2>&1"


rule reexec_collect:
    """Predictions (replay, with and without interference) next to the measurements."""
    input:
        cases=expand(f"{REEXEC_OUT}/{{case}}/meta.json", case=reexec_cases()),
        inter=reexec_calibration_files(),
    output:
        measured=f"{REEXEC_OUT}/measured.csv",
        iterations=f"{REEXEC_OUT}/iterations.csv",
        provenance=f"{REEXEC_OUT}/provenance.json",
    log:
        f"{LOGS}/reexec/collect.log",
    params:
        folders=lambda wc, input: reexec_stage.case_folders(input.cases),
        # one JSON per calibrated (network, world size); a case without its own gets
        # its network's first one, a network without any the first network's
        inter=lambda wc, input: checked(
            reexec_stage.collect_interference_args, REEXEC, input.inter, REEXEC_CONFIG
        ),
    shell:
        "{GS} reexec collect {params.folders} {params.inter} -o {output.measured} "
        "--iterations-csv {output.iterations} --provenance {output.provenance} > {log} 2>&1"


rule reexec_analyze:
    """Errors, median |error|, worst, Kendall tau; table and figure (re-measured data)."""
    input:
        measured=f"{REEXEC_OUT}/measured.csv",
        iterations=f"{REEXEC_OUT}/iterations.csv",
    output:
        stats=f"{REEXEC_OUT}/stats.csv",
        summary_tex=f"{REEXEC_OUT}/reexec-summary.tex",
        summary_md=f"{REEXEC_OUT}/reexec-summary.md",
        errors=f"{REEXEC_OUT}/errors.csv",
        stock_ddp_tex=f"{REEXEC_OUT}/reexec-stock-ddp.tex",
        stock_ddp_md=f"{REEXEC_OUT}/reexec-stock-ddp.md",
        tex=f"{REEXEC_OUT}/reexec.tex",
        md=f"{REEXEC_OUT}/reexec.md",
        pdf=f"{REEXEC_OUT}/reexec.pdf",
        png=f"{REEXEC_OUT}/reexec.png",
    log:
        f"{LOGS}/reexec/analyze.log",
    shell:
        "{GS} reexec analyze --input {input.measured} --iterations-csv {input.iterations} "
        "--stats {output.stats} --errors {output.errors} "
        "--summary-table {output.summary_tex} --summary-md {output.summary_md} "
        "--stock-ddp-tex {output.stock_ddp_tex} --stock-ddp-md {output.stock_ddp_md} "
        "--table {output.tex} --md {output.md} --figure {output.pdf} --png {output.png} "
        "> {log} 2>&1"


rule reexec_committed:
    """Figure, table and statistics of the COMMITTED data (no measurement)."""
    input:
        measured=f"{REEXEC_DATA}/measured.csv",
        iterations=f"{REEXEC_DATA}/iterations.csv",
    output:
        stats=f"{RESULTS}/reexec-committed/stats.csv",
        summary_tex=f"{TAB}/reexec-summary.tex",
        summary_md=reported(
            f"{TAB}/reexec-summary.md", "reexec-summary", "Re-execution"
        ),
        errors=f"{RESULTS}/reexec-committed/errors.csv",
        # stock PyTorch DDP with a plan's buckets (ddp-list items; "not measured" in data
        # from before them) and best's gain split into implementation and schedule
        stock_ddp_tex=f"{TAB}/reexec-stock-ddp.tex",
        stock_ddp_md=f"{TAB}/reexec-stock-ddp.md",
        tex=f"{TAB}/reexec.tex",
        md=reported(f"{TAB}/reexec.md", "reexec", "Re-execution"),
        pdf=f"{FIG}/reexec.pdf",
        png=reported(f"{FIG}/reexec.png", "reexec", "Re-execution"),
    log:
        f"{LOGS}/reexec/committed.log",
    shell:
        "{GS} reexec analyze --input {input.measured} --iterations-csv {input.iterations} "
        "--stats {output.stats} --errors {output.errors} "
        "--summary-table {output.summary_tex} --summary-md {output.summary_md} "
        "--stock-ddp-tex {output.stock_ddp_tex} --stock-ddp-md {output.stock_ddp_md} "
        "--table {output.tex} --md {output.md} --figure {output.pdf} --png {output.png} "
        "> {log} 2>&1"


# Gradient accumulation and ZeRO-1 (config/reexec-accum.yaml, same schema; its own case set
# and output folder, so that it never reruns the cases above). Per case: stock DDP at its
# default caps, `best` through the executor, ZeRO-1 with and without overlap_with_ddp
# (k = 1), the compute-only control; k = grad_accum micro-batches per optimizer step.
# Planned and predicted with the COMMITTED interference calibrations (paper/data/reexec/).
#
#   sudo ... snakemake --profile profiles/default reexec_accum     re-measure (NOT in
#       `all`; the tbf1gbit cases need root; about 20 min on the 2-core build VM)
#   snakemake ... reexec_accum_committed    tables + macros of the COMMITTED data
#       (paper/data/reexec-accum/); in `all` through reexec_files() once they exist.
# To publish: copy results/reexec-accum/{measured.csv,iterations.csv,provenance.json} and
# the case folders results/reexec-accum/<case>/ (as cases/<case>/) to paper/data/reexec-accum/.


rule reexec_accum:
    """Re-measure the accumulation / ZeRO-1 cases, predict, analyse (not in `all`)."""
    input:
        f"{REEXEC_ACCUM_OUT}/measured.csv",
        f"{REEXEC_ACCUM_OUT}/rows.csv",
        f"{REEXEC_ACCUM_OUT}/summary.csv",


rule reexec_accum_run:
    """One case of config/reexec-accum.yaml (k micro-batches per step; ZeRO-1 at k = 1)."""
    input:
        interference=lambda wc: checked(
            reexec_stage.accum_case_interference, _accum_cases(), wc.case, REEXEC_DATA
        ),
    output:
        iterations=f"{REEXEC_ACCUM_OUT}/{{case}}/iterations.csv",
        meta=f"{REEXEC_ACCUM_OUT}/{{case}}/meta.json",
    log:
        f"{LOGS}/reexec-accum/{{case}}.log",
    wildcard_constraints:
        case="[A-Za-z0-9][A-Za-z0-9_.-]*",
    threads: workflow.cores  # measurements run alone, never side by side
    resources:
        runtime=60,
    shell:
        "{GS} reexec run --config {REEXEC_ACCUM_CONFIG} --case {wildcards.case} "
        "--interference {input.interference} -o {REEXEC_ACCUM_OUT} > {log} 2>&1"


rule reexec_accum_collect:
    """Predictions (replay of a step of k micro-batches; zero1_torch for ZeRO-1) next to
    the measurements."""
    input:
        cases=expand(
            f"{REEXEC_ACCUM_OUT}/{{case}}/meta.json",
            case=[c.name for c in _accum_cases()],
        ),
        inter=reexec_stage.accum_interference_files(_accum_cases(), REEXEC_DATA),
    output:
        measured=f"{REEXEC_ACCUM_OUT}/measured.csv",
        iterations=f"{REEXEC_ACCUM_OUT}/iterations.csv",
        provenance=f"{REEXEC_ACCUM_OUT}/provenance.json",
    log:
        f"{LOGS}/reexec-accum/collect.log",
    params:
        folders=lambda wc, input: reexec_stage.case_folders(input.cases),
        inter=lambda wc, input: reexec_stage.accum_collect_args(input.inter),
    shell:
        "{GS} reexec collect {params.folders} {params.inter} -o {output.measured} "
        "--iterations-csv {output.iterations} --provenance {output.provenance} > {log} 2>&1"


rule reexec_accum_analyze:
    """Per case and family predicted vs measured (bootstrap intervals), median |error| per
    family and k (re-measured data)."""
    input:
        measured=f"{REEXEC_ACCUM_OUT}/measured.csv",
        iterations=f"{REEXEC_ACCUM_OUT}/iterations.csv",
    output:
        rows=f"{REEXEC_ACCUM_OUT}/rows.csv",
        summary=f"{REEXEC_ACCUM_OUT}/summary.csv",
        tex=f"{REEXEC_ACCUM_OUT}/reexec-accum.tex",
        md=f"{REEXEC_ACCUM_OUT}/reexec-accum.md",
        summary_tex=f"{REEXEC_ACCUM_OUT}/reexec-accum-summary.tex",
        summary_md=f"{REEXEC_ACCUM_OUT}/reexec-accum-summary.md",
    log:
        f"{LOGS}/reexec-accum/analyze.log",
    shell:
        "{GS} reexec accum --input {input.measured} --iterations-csv {input.iterations} "
        "--rows {output.rows} --summary {output.summary} --tex {output.tex} "
        "--md {output.md} --summary-tex {output.summary_tex} "
        "--summary-md {output.summary_md} > {log} 2>&1"


rule reexec_accum_committed:
    """Tables and macros of the COMMITTED accumulation / ZeRO-1 data (no measurement)."""
    input:
        measured=f"{REEXEC_ACCUM_DATA}/measured.csv",
        iterations=f"{REEXEC_ACCUM_DATA}/iterations.csv",
    output:
        rows=f"{RESULTS}/reexec-accum-committed/rows.csv",
        summary=f"{RESULTS}/reexec-accum-committed/summary.csv",
        tex=f"{TAB}/reexec-accum.tex",
        md=f"{TAB}/reexec-accum.md",
        summary_tex=f"{TAB}/reexec-accum-summary.tex",
        summary_md=f"{TAB}/reexec-accum-summary.md",
        macros=f"{GEN}/reexec-accum-macros.tex",
    log:
        f"{LOGS}/reexec-accum/committed.log",
    shell:
        "{GS} reexec accum --input {input.measured} --iterations-csv {input.iterations} "
        "--rows {output.rows} --summary {output.summary} --tex {output.tex} "
        "--md {output.md} --summary-tex {output.summary_tex} "
        "--summary-md {output.summary_md} --macros {output.macros} > {log} 2>&1"
