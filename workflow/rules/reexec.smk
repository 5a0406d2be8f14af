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
# Configuration: config/reexec.yaml (mapping `reexec`): `settings` (algorithms, DDP caps,
# warmup/iters/rounds, threads, backend), `cases` (model, batch_size, world_size, network,
# compute[, comm, name]) and `interference` (backend, networks, world_sizes, kernel,
# comm_bytes, small_bytes, rounds, reps). A case's comm model defaults to traces/comm/cpu/gloo-<network>-p<P>.csv.
# To publish a re-measurement: copy results/reexec/{measured.csv,iterations.csv,
# provenance.json,interference-*-p*.json} to paper/data/reexec/ and commit.

REEXEC_CONFIG = "config/reexec.yaml"
REEXEC_DATA = "paper/data/reexec"
REEXEC_OUT = f"{RESULTS}/reexec"


def _load_reexec():
    path = Path(REEXEC_CONFIG)
    if not path.is_file():
        return {}
    spec = (yaml.safe_load(path.read_text()) or {}).get("reexec") or {}
    if not isinstance(spec, dict):
        _fail(f"{REEXEC_CONFIG}: reexec must be a mapping")
    return spec


REEXEC = _load_reexec()


def reexec_cases():
    """Case names of config/reexec.yaml (the CLI's naming rule, checked by the CLI)."""
    from gradsched.reexec.experiment import parse_cases

    return [c.name for c in parse_cases(REEXEC.get("cases") or [], REEXEC_CONFIG)]


def _case_interference(wc):
    """The interference JSON the `best` planner of this case scores with: the case's
    network's, or the first calibrated network's (as reexec_collect uses)."""
    from gradsched.reexec.experiment import parse_cases

    cases = {c.name: c for c in parse_cases(REEXEC.get("cases") or [], REEXEC_CONFIG)}
    if wc.case not in cases:
        _fail(f"reexec: no case {wc.case!r} in {REEXEC_CONFIG}")
    case = cases[wc.case]
    net, world = _calibration_for(case.network, case.world_size)
    return f"{REEXEC_OUT}/interference-{net}-p{world}.json"


def _calibration_for(network, world_size):
    """The calibrated (network, world size) that serves a case: its own, else its
    network's first calibrated world size, else the first network's (as
    gradsched.reexec.experiment.interference_for picks)."""
    nets, worlds = reexec_networks(), reexec_interference_world_sizes()
    net = network if network in nets else nets[0]
    return net, (world_size if world_size in worlds else worlds[0])


def reexec_networks():
    inter = REEXEC.get("interference") or {}
    return list(inter.get("networks") or ["loopback"])


def reexec_interference_world_sizes():
    inter = REEXEC.get("interference") or {}
    worlds = [int(w) for w in inter.get("world_sizes") or [2]]
    if any(w < 2 for w in worlds):
        _fail(f"{REEXEC_CONFIG}: interference world_sizes must be >= 2")
    return worlds


def reexec_calibrations():
    """(network, world size) of every interference calibration."""
    return [
        (n, w) for n in reexec_networks() for w in reexec_interference_world_sizes()
    ]


def _interference_args(wc):
    inter = dict(REEXEC.get("interference") or {})
    args = []
    for key, flag in (
        ("backend", "--backend"),
        ("kernel", "--kernel"),
        ("comm_bytes", "--comm-bytes"),
        ("small_bytes", "--small-bytes"),
        ("rounds", "--rounds"),
        ("reps", "--reps"),
        ("threads", "--threads"),
    ):
        if key in inter:
            args.append(f"{flag} {shlex.quote(str(inter[key]))}")
    args.append(f"--world-size {int(wc.world)}")
    rates = {"tbf1gbit": "1gbit", "tbf100mbit": "100mbit"}
    if wc.network in rates:
        args.append(f"--cluster {rates[wc.network]}")
    elif wc.network != "loopback":
        _fail(f"reexec interference: unknown network {wc.network!r}")
    return " ".join(args)


def reexec_files():
    """Figure and table drawn from the committed data (for the lead's `all`)."""
    return [
        f"{FIG}/reexec.pdf",
        f"{FIG}/reexec.png",
        f"{TAB}/reexec.tex",
        f"{TAB}/reexec.md",
        f"{TAB}/reexec-summary.tex",
        f"{TAB}/reexec-summary.md",
        f"{RESULTS}/reexec-committed/stats.csv",
    ]


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
        network="loopback|tbf1gbit|tbf100mbit",
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
        inter=[
            f"{REEXEC_OUT}/interference-{n}-p{w}.json"
            for n, w in reexec_calibrations()
        ],
    output:
        measured=f"{REEXEC_OUT}/measured.csv",
        iterations=f"{REEXEC_OUT}/iterations.csv",
        provenance=f"{REEXEC_OUT}/provenance.json",
    log:
        f"{LOGS}/reexec/collect.log",
    params:
        folders=lambda wc, input: " ".join(str(Path(p).parent) for p in input.cases),
        # one JSON per calibrated (network, world size); a case without its own gets
        # its network's first one, a network without any the first network's
        inter=lambda wc, input: " ".join(
            "--interference " + shlex.quote(f"{key}={p}")
            for key, p in [
                *zip((f"{n}-p{w}" for n, w in reexec_calibrations()), input.inter),
                ("*", input.inter[0]),
            ]
        ),
    shell:
        "{GS} reexec collect {params.folders} {params.inter} -o {output.measured} "
        "--iterations {output.iterations} --provenance {output.provenance} > {log} 2>&1"


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
        tex=f"{REEXEC_OUT}/reexec.tex",
        md=f"{REEXEC_OUT}/reexec.md",
        pdf=f"{REEXEC_OUT}/reexec.pdf",
        png=f"{REEXEC_OUT}/reexec.png",
    log:
        f"{LOGS}/reexec/analyze.log",
    shell:
        "{GS} reexec analyze --input {input.measured} --iterations {input.iterations} "
        "--stats {output.stats} --errors {output.errors} "
        "--summary-table {output.summary_tex} --summary-md {output.summary_md} "
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
        tex=f"{TAB}/reexec.tex",
        md=reported(f"{TAB}/reexec.md", "reexec", "Re-execution"),
        pdf=f"{FIG}/reexec.pdf",
        png=reported(f"{FIG}/reexec.png", "reexec", "Re-execution"),
    log:
        f"{LOGS}/reexec/committed.log",
    shell:
        "{GS} reexec analyze --input {input.measured} --iterations {input.iterations} "
        "--stats {output.stats} --errors {output.errors} "
        "--summary-table {output.summary_tex} --summary-md {output.summary_md} "
        "--table {output.tex} --md {output.md} --figure {output.pdf} --png {output.png} "
        "> {log} 2>&1"
