# Stage: tables (booktabs LaTeX for the paper + Markdown for humans).

TABLE_INPUTS = {
    "captured-compute": f"{RESULTS}/traces/captured.csv",
    "captured-comm": f"{RESULTS}/traces/captured.csv",
    "fits": f"{RESULTS}/fit/fits.csv",
    "crossws": f"{RESULTS}/fit/crossws.csv",
    "replay": f"{RESULTS}/replay/main/replay.csv",
    "compare": f"{RESULTS}/compare/compare.csv",
    "topology": f"{RESULTS}/topology/check.csv",
}
TABLE_TITLES = {
    "captured-compute": "Compute traces captured here",
    "captured-comm": "Collective sweeps captured here",
    "fits": "Held-out MAPE of each fitted model per comm trace",
    "crossws": "Cross-world-size prediction error",
    "replay": "Replayed iteration time per algorithm and case",
    "compare": "Reproduced vs published numbers",
    "topology": "Two-level topology vs the ABCI multi-node sweeps",
}


rule topology_check:
    """A100 nodes, two-level topology model (docs/topology.md): intra level = the 1-node
    sweep, inter level identified from 2 nodes, every multi-node sweep predicted."""
    input:
        intra=TOPOLOGY_CHECK["intra"],
        sweeps=TOPOLOGY_CHECK["sweeps"],
    output:
        f"{RESULTS}/topology/check.csv",
    log:
        f"{LOGS}/topology/check.log",
    shell:
        "{GS} study topology-check --intra {input.intra} --sweep {input.sweeps} "
        "-o {output} > {log} 2>&1"


rule table:
    """One table from its result CSV."""
    input:
        lambda wc: TABLE_INPUTS[wc.table],
    output:
        tex=f"{TAB}/{{table}}.tex",
        md=report(
            f"{TAB}/{{table}}.md",
            caption="../report/tables.rst",
            category="Tables",
            labels={"table": "{table}"},
        ),
    log:
        f"{LOGS}/tables/{{table}}.log",
    wildcard_constraints:
        table="|".join(TABLE_INPUTS),
    params:
        title=lambda wc: TABLE_TITLES[wc.table],
        families=lambda wc: (
            " ".join(f"--family {f}" for f in MAIN_REPLAY_FAMILIES)
            if wc.table == "replay"
            else ""
        ),
        # the plain replay's cases of a calibrated link, marked (report/quote_rule.py)
        calibrated=lambda wc: CALIBRATED_LINK_ARGS if wc.table == "replay" else "",
    shell:
        "{GS} report table {wildcards.table} --input {input} --tex {output.tex} "
        "--md {output.md} --title {params.title:q} {params.families} "
        "{params.calibrated} > {log} 2>&1"


rule table_replay_family:
    """The replay table of one compute family without a real pairing (matched GPU type)."""
    input:
        f"{RESULTS}/replay/main/replay.csv",
    output:
        tex=f"{TAB}/replay-{{family}}.tex",
        md=report(
            f"{TAB}/replay-{{family}}.md",
            caption="../report/replay-family-tables.rst",
            category="Tables",
            labels={"table": "replay-{family}"},
        ),
    log:
        f"{LOGS}/tables/replay-{{family}}.log",
    wildcard_constraints:
        family="|".join(t[len("replay-") :] for t in REPLAY_FAMILY_TABLES) or "^$",
    params:
        title=lambda wc: f"Replayed iteration time per algorithm ({wc.family} cases)",
    shell:
        "{GS} report table replay --input {input} --family {wildcards.family} "
        "{CALIBRATED_LINK_ARGS} --tex {output.tex} --md {output.md} --title {params.title:q} "
        "> {log} 2>&1"


def scaling_inputs():
    """The compute and comm files the scaling spec names (so the check reruns on a change)."""
    return sorted(
        {
            str(case[key])
            for case in SCALING.get("cases") or []
            for key in ("compute", "comm")
        }
    )


# The replay (DDP, GPU compute trace, single-node sweep) vs published DGX throughput (in
# the report batch, before its table and macros).
report_step(
    f"{LOGS}/published/gpu-scaling.log",
    f"study scaling-check --spec {SCALING_SPEC} -o {{output.csv}}",
    [SCALING_SPEC, *scaling_inputs()],
    csv=f"{RESULTS}/published/gpu-scaling.csv",
)


# Predicted vs published images/s on 1 and 8 GPUs and the scaling, with errors.
report_step(
    f"{LOGS}/tables/gpu-scaling.log",
    "report scaling-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'Predicted vs published DGX ResNet-50 throughput'",
    [f"{RESULTS}/published/gpu-scaling.csv"],
    tex=f"{TAB}/gpu-scaling.tex",
    md=reported(f"{TAB}/gpu-scaling.md", "gpu-scaling", "Tables"),
)


# The host-aware and the single-stream replay of the H200 host traces vs the hook-free
# CUDA-event iterations (forward + backward) of the same process (in the report batch,
# before its table).
report_step(
    f"{LOGS}/h200/host-check.log",
    f"study host-check {' '.join(HOST_TRACES)} --summary {HOST_SUMMARY} -o {{output.csv}}",
    [*HOST_TRACES, HOST_SUMMARY],
    csv=f"{RESULTS}/h200/host-check.csv",
)


# Measured vs both replays per H200 configuration, with median and worst |error|.
report_step(
    f"{LOGS}/tables/host-check.log",
    "report host-check-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'Host-aware vs single-stream replay, H200 hook-free iterations'",
    [f"{RESULTS}/h200/host-check.csv"],
    tex=f"{TAB}/host-check.tex",
    md=reported(f"{TAB}/host-check.md", "host-check", "Tables"),
)


rule traces_inventory:
    """One row per captured trace: what was measured, how, and its quality checks."""
    input:
        CAPTURED_TRACES,
    output:
        f"{RESULTS}/traces/captured.csv",
    log:
        f"{LOGS}/tables/traces-inventory.log",
    shell:
        "{GS} traces inventory {input} -o {output} > {log} 2>&1"


# The scaling check's numbers as \\gsScaling... macros for paper/sections/gpu.tex.
report_step(
    f"{LOGS}/paper/scaling-macros.log",
    "report scaling-macros --input {input} -o {output.tex}",
    [f"{RESULTS}/published/gpu-scaling.csv"],
    tex=f"{GEN}/scaling-macros.tex",
)


# The replay result's figures and tables (one figure per compute family, the GPU
# generations and gaps figures, the replay table, one table per family without a real
# pairing) in one `gradsched batch` job: each is a fraction of a second of work after about
# a second of imports (pandas, matplotlib). Their own rules still make any one of them
# alone (another configuration's families).
def replay_report_jobs(src):
    """[(log, gradsched arguments)] of every report drawn from the replay result ``src``."""
    jobs = [
        (
            f"{LOGS}/figures/replay-vs-world-size-{family}.log",
            f"report figure replay-vs-world-size --input {src} --family {family} "
            f"{CALIBRATED_LINK_ARGS} -o {FIG}/replay-vs-world-size-{family}.pdf "
            f"--png {FIG}/replay-vs-world-size-{family}.png",
        )
        for family in case_families()
    ]
    jobs += [
        (
            f"{LOGS}/figures/{name}.log",
            f"report figure {name} --input {src} {CALIBRATED_LINK_ARGS} "
            f"-o {FIG}/{name}.pdf --png {FIG}/{name}.png",
        )
        for name in ("gpu-generations", "gaps")
    ]
    families = " ".join(f"--family {f}" for f in MAIN_REPLAY_FAMILIES)
    jobs.append(
        (
            f"{LOGS}/tables/replay.log",
            f"report table replay --input {src} --tex {TAB}/replay.tex --md {TAB}/replay.md "
            f"--title {shlex.quote(TABLE_TITLES['replay'])} {families} "
            f"{CALIBRATED_LINK_ARGS}",
        )
    )
    for table in REPLAY_FAMILY_TABLES:
        family = table[len("replay-") :]
        title = f"Replayed iteration time per algorithm ({family} cases)"
        jobs.append(
            (
                f"{LOGS}/tables/{table}.log",
                f"report table replay --input {src} --family {family} "
                f"{CALIBRATED_LINK_ARGS} --tex {TAB}/{table}.tex --md {TAB}/{table}.md "
                f"--title {shlex.quote(title)}",
            )
        )
    return jobs


rule replay_reports:
    """Every figure and table of the replay result, in one job (figure_replay,
    figure_gpu_generations, figure_gaps, table replay and table_replay_family, each as its
    own rule would run it)."""
    input:
        f"{RESULTS}/replay/main/replay.csv",
    output:
        [f"{FIG}/replay-vs-world-size-{family}.pdf" for family in case_families()],
        [
            report(
                f"{FIG}/replay-vs-world-size-{family}.png",
                caption="../report/replay-vs-world-size.rst",
                category="Replay",
                labels={"family": family},
            )
            for family in case_families()
        ],
        f"{FIG}/gpu-generations.pdf",
        reported(f"{FIG}/gpu-generations.png", "gpu-generations", "Replay"),
        f"{FIG}/gaps.pdf",
        reported(f"{FIG}/gaps.png", "gaps", "Replay"),
        f"{TAB}/replay.tex",
        report(
            f"{TAB}/replay.md",
            caption="../report/tables.rst",
            category="Tables",
            labels={"table": "replay"},
        ),
        [f"{TAB}/{table}.tex" for table in REPLAY_FAMILY_TABLES],
        [
            report(
                f"{TAB}/{table}.md",
                caption="../report/replay-family-tables.rst",
                category="Tables",
                labels={"table": table},
            )
            for table in REPLAY_FAMILY_TABLES
        ],
    log:
        f"{LOGS}/replay/reports.batch.log",
    params:
        jobs=lambda wc, input: batch_lines(replay_report_jobs(input[0])),
    shell:
        BATCH


ruleorder: replay_reports > figure_replay
ruleorder: replay_reports > table
ruleorder: replay_reports > table_replay_family
ruleorder: replay_reports > figure_gpu_generations
ruleorder: replay_reports > figure_gaps
