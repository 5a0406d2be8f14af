# Stage: replay. Every (compute, network, comm trace) case with every configured algorithm.


def replay_arguments(set_name, compute, comm, output, world=None):
    """The `gradsched replay` arguments of one case of a result set."""
    algorithms = set_algorithms(set_name)
    replay = config.get("replay", {})
    at = f"--world-size {world} " if world is not None else ""
    return (
        f"replay --compute {shlex.quote(compute_path(compute))} --comm {shlex.quote(comm)} "
        f"{at}--algorithms {','.join(algorithms)} {knob_args(algorithms)} "
        f"--replay-iters {replay.get('iterations', 5)} --channels {replay.get('channels', 1)} "
        f"-o {output}"
    )


def replay_groups():
    """{(set, network): [(output, log, arguments, inputs)]}: every case of a result set on
    a network (one per comm trace, and the world sizes beyond its sweeps on its scaled
    model), replayed by one job."""
    groups = {}
    for set_name in ("main", "smoke"):
        for c, n, stem, path in set_cases(set_name):
            out = f"{RESULTS}/replay/{set_name}/{c}/{n}/{stem}.csv"
            groups.setdefault((set_name, n), []).append(
                (
                    out,
                    f"{LOGS}/replay/{set_name}/{c}/{n}/{stem}.log",
                    replay_arguments(set_name, c, path, out),
                    [compute_path(c), path],
                )
            )
        for c, n, world in extrapolated_cases(set_name):
            out = extrapolated_result(set_name, c, n, world)
            model = f"{RESULTS}/extrapolate/{n}.scaled.json"
            groups.setdefault((set_name, n), []).append(
                (
                    out,
                    f"{LOGS}/replay/{set_name}/{c}/{n}/extrapolated/p{world}.log",
                    replay_arguments(set_name, c, model, out, world),
                    [compute_path(c), model],
                )
            )
    return groups


# One job per (result set, network) plans and replays the configured algorithms on each of
# its cases (a case: a compute trace at one world size).
for (_set, _network), _cases in replay_groups().items():

    rule:
        name:
            rule_name("replay_cases", _set, _network)
        input:
            sorted({path for *_, paths in _cases for path in paths}),
        output:
            [out for out, *_ in _cases],
        log:
            f"{LOGS}/replay/{_set}/{_network}.batch.log",
        resources:
            runtime=60,
        params:
            jobs=batch_lines((log, args) for _, log, args, _ in _cases),
        shell:
            BATCH


rule collect_replay:
    """One table of every case of a result set (adds trace, network, nodes)."""
    input:
        lambda wc: replay_results(wc.set),
    output:
        f"{RESULTS}/replay/{{set}}/replay.csv",
    log:
        f"{LOGS}/replay/{{set}}/collect.log",
    params:
        cases=lambda wc: " ".join(
            f"--case {c} {n} {shlex.quote(path)} {RESULTS}/replay/{wc.set}/{c}/{n}/{stem}.csv"
            for c, n, stem, path in set_cases(wc.set)
        ),
        labels=lambda wc: case_labels(wc.set),
        extrapolated=lambda wc: " ".join(
            f"--extrapolated {c} {n} {shlex.quote(extrapolations()[n]['reference'])} "
            f"{extrapolated_result(wc.set, c, n, w)}"
            for c, n, w in extrapolated_cases(wc.set)
        ),
    shell:
        "{GS} report collect {params.cases} {params.extrapolated} {params.labels} "
        "-o {output} > {log} 2>&1"


def timeline_jobs():
    """[(algorithm, its folder)] of the timeline case (config `timeline`)."""
    tl = config["timeline"]
    folder = f"{tl['compute']}/{tl['network']}/{tl['comm']}"
    return [(alg, folder) for alg in tl.get("algorithms", ["wfbp", "mgwfbp", "dear"])]


rule replay_timeline:
    """Replay each algorithm of the timeline case and keep its timeline (CSV + Perfetto),
    in one job."""
    input:
        compute=compute_path(config["timeline"]["compute"]),
        comm=network_traces(config["timeline"]["network"])[config["timeline"]["comm"]],
    output:
        [
            f"{RESULTS}/timeline/{folder}/{alg}.{kind}"
            for alg, folder in timeline_jobs()
            for kind in ("timeline.csv", "trace.json", "result.csv")
        ],
    log:
        f"{LOGS}/timeline/batch.log",
    params:
        jobs=lambda wc, input: batch_lines(
            (
                f"{LOGS}/timeline/{folder}/{alg}.log",
                f"replay --compute {input.compute} --comm {input.comm} --algorithms {alg} "
                f"{knob_args([alg])} "
                f"--replay-iters {config.get('replay', {}).get('iterations', 5)} "
                f"--timeline {RESULTS}/timeline/{folder} "
                f"-o {RESULTS}/timeline/{folder}/{alg}.result.csv",
            )
            for alg, folder in timeline_jobs()
        ),
    shell:
        BATCH


rule replay_bcaffe_check:
    """WFBP and MG-WFBP on each B-Caffe compute + comm trace pair (for the compare target),
    in one job."""
    input:
        sorted(
            {
                p
                for item in bcaffe_checks().values()
                for p in (item["compute"], item["comm"])
            }
        ),
    output:
        [f"{RESULTS}/compare/bcaffe/{stem}.csv" for stem in bcaffe_checks()],
    log:
        f"{LOGS}/compare/bcaffe.log",
    params:
        jobs=batch_lines(
            (
                f"{LOGS}/compare/bcaffe/{stem}.log",
                f"replay --compute {shlex.quote(item['compute'])} "
                f"--comm {shlex.quote(item['comm'])} --algorithms wfbp,mgwfbp "
                f"--replay-iters {config.get('replay', {}).get('iterations', 5)} "
                f"-o {RESULTS}/compare/bcaffe/{stem}.csv",
            )
            for stem, item in bcaffe_checks().items()
        ),
    shell:
        BATCH


rule replay_forward:
    """The real K80 case (its trace did not measure forward) at each assumed forward ratio,
    in one job."""
    input:
        compute=compute_path(FORWARD_CASE["compute"]),
        comm=FORWARD_CASE["comm"],
    output:
        [f"{RESULTS}/replay/forward/r{ratio}.csv" for ratio in FORWARD_RATIOS],
    log:
        f"{LOGS}/replay/forward.log",
    params:
        jobs=lambda wc, input: batch_lines(
            (
                f"{LOGS}/replay/forward/r{ratio}.log",
                f"replay --compute {input.compute} --comm {input.comm} "
                f"--algorithms {','.join(set_algorithms('main'))} "
                f"{knob_args(set_algorithms('main'))} "
                f"--replay-iters {config.get('replay', {}).get('iterations', 5)} "
                f"--forward-ratio {ratio} -o {RESULTS}/replay/forward/r{ratio}.csv",
            )
            for ratio in FORWARD_RATIOS
        ),
    shell:
        BATCH


# Planner ranking vs the assumed forward time (0, the MG-WFBP simulator's 0.5, 1).
report_step(
    f"{LOGS}/tables/forward.log",
    "report forward "
    + " ".join(f"--run {r} {RESULTS}/replay/forward/r{r}.csv" for r in FORWARD_RATIOS)
    + " --tex {output.tex} --md {output.md} --title 'Iteration time and rank vs assumed "
    "forward time (GoogleNet, K80, 8 nodes)'",
    [f"{RESULTS}/replay/forward/r{r}.csv" for r in FORWARD_RATIOS],
    tex=f"{TAB}/forward.tex",
    md=reported(f"{TAB}/forward.md", "forward", "Tables"),
)


# The headline (the real K80 case, FORWARD_CASE) under each fitted comm model kind: the
# comm trace's fitted model JSON instead of the trace itself.
HEADLINE_MODEL_KINDS = ["alpha-beta", "piecewise", "interp"]
HEADLINE_COMM_STEM = Path(FORWARD_CASE["comm"]).stem


rule headline_models:
    """The headline's comm trace fitted with each model kind, and the real K80 case
    replayed with each fitted model, in one job (each fit before its replay)."""
    input:
        compute=compute_path(FORWARD_CASE["compute"]),
        comm=FORWARD_CASE["comm"],
    output:
        [
            f"{RESULTS}/replay/headline-models/{kind}.{ext}"
            for kind in HEADLINE_MODEL_KINDS
            for ext in ("model.json", "csv")
        ],
    log:
        f"{LOGS}/replay/headline-models.log",
    params:
        jobs=lambda wc, input: batch_lines(
            job
            for kind in HEADLINE_MODEL_KINDS
            for job in (
                (
                    f"{LOGS}/replay/headline-models/{kind}.fit.log",
                    f"fit {input.comm} --model {kind} "
                    f"-o {RESULTS}/replay/headline-models/{kind}.model.json",
                ),
                (
                    f"{LOGS}/replay/headline-models/{kind}.log",
                    f"replay --compute {input.compute} "
                    f"--comm {RESULTS}/replay/headline-models/{kind}.model.json "
                    f"--algorithms {','.join(set_algorithms('main'))} "
                    f"{knob_args(set_algorithms('main'))} "
                    f"--replay-iters {config.get('replay', {}).get('iterations', 5)} "
                    f"-o {RESULTS}/replay/headline-models/{kind}.csv",
                ),
            )
        ),
    shell:
        BATCH


# Planner ranking of the real K80 case under each fitted comm model kind.
report_step(
    f"{LOGS}/tables/headline-models.log",
    "report headline-models "
    + " ".join(
        f"--run {k} {RESULTS}/replay/headline-models/{k}.csv"
        for k in HEADLINE_MODEL_KINDS
    )
    + " --tex {output.tex} --md {output.md} --title 'Iteration time and rank per comm "
    "model kind (GoogleNet, K80, 8 nodes)'",
    [f"{RESULTS}/replay/headline-models/{k}.csv" for k in HEADLINE_MODEL_KINDS],
    tex=f"{TAB}/headline-models.tex",
    md=reported(f"{TAB}/headline-models.md", "headline-models", "Tables"),
)


# MG-WFBP against `search` with the per-collective CPU cost the re-execution calibrated
# (paper/data/reexec/interference-<link>-p<P>.json) and the executor's issue order: the CPU
# cases on the emulated links at the world sizes a calibration exists for.
CALIBRATED_LINKS = {
    "cpu-gloo-1gbit": "tbf1gbit",
    "cpu-gloo-100mbit": "tbf100mbit",
    "cpu-gloo-loopback": "loopback",
}
CALIBRATED_CASES = [
    (compute, CALIBRATED_LINKS[network], world)
    for compute, network, _, _ in cases()
    if network in CALIBRATED_LINKS
    for world in (2, 3)
    if Path(
        f"paper/data/reexec/interference-{CALIBRATED_LINKS[network]}-p{world}.json"
    ).is_file()
    and Path(f"traces/comm/cpu/gloo-{CALIBRATED_LINKS[network]}-p{world}.csv").is_file()
]


rule replay_calibrated:
    """The CPU cases with the calibrated per-collective cost (MG-WFBP, the contiguous
    optimum, search, WFBP), in one job."""
    input:
        sorted(
            {
                path
                for c, link, w in CALIBRATED_CASES
                for path in (
                    compute_path(c),
                    f"traces/comm/cpu/gloo-{link}-p{w}.csv",
                    f"paper/data/reexec/interference-{link}-p{w}.json",
                )
            }
        ),
    output:
        [
            f"{RESULTS}/replay/calibrated/{c}/{link}-p{w}.csv"
            for c, link, w in CALIBRATED_CASES
        ],
    log:
        f"{LOGS}/replay/calibrated.log",
    params:
        jobs=batch_lines(
            (
                f"{LOGS}/replay/calibrated/{c}/{link}-p{w}.log",
                f"replay --compute {shlex.quote(compute_path(c))} "
                f"--comm traces/comm/cpu/gloo-{link}-p{w}.csv "
                "--algorithms wfbp,mgwfbp,contiguous_optimum,search "
                f"--replay-iters {config.get('replay', {}).get('iterations', 5)} "
                f"--interference paper/data/reexec/interference-{link}-p{w}.json "
                f"--issue executor -o {RESULTS}/replay/calibrated/{c}/{link}-p{w}.csv",
            )
            for c, link, w in CALIBRATED_CASES
        ),
    shell:
        BATCH
