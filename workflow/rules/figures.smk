# Stage: figures (seaborn; vector PDF + PNG). Captions for `snakemake --report` in
# workflow/report/. A figure whose data is missing says so on its canvas.


# The links a calibrated replay exists for (replay.smk): their plain replay rows are drawn
# hollow, as the quoting rule (report/quote_rule.py) leaves them out of every number.
CALIBRATED_LINK_ARGS = " ".join(
    f"--calibrated-link {link}"
    for link in sorted({link for _, link, _ in CALIBRATED_CASES})
)


def timeline_inputs():
    tl = config["timeline"]
    network_traces(tl["network"])
    return [
        f"{RESULTS}/timeline/{tl['compute']}/{tl['network']}/{tl['comm']}/{alg}.timeline.csv"
        for alg in tl.get("algorithms", ["wfbp", "mgwfbp", "dear"])
    ]


rule figure_fit_curves:
    """(a) measured vs fitted collective time vs message size, per comm trace."""
    input:
        comm=list(curve_traces().values()),
        models=curve_models(),
        fits=f"{RESULTS}/fit/fits.csv",
    output:
        pdf=f"{FIG}/fit-curves.pdf",
        png=reported(f"{FIG}/fit-curves.png", "fit-curves", "Cost models"),
    log:
        f"{LOGS}/figures/fit-curves.log",
    shell:
        "{GS} report figure fit-curves --comm {input.comm} --models {input.models} "
        "--fits {input.fits} -o {output.pdf} --png {output.png} > {log} 2>&1"


rule figure_fit_mape:
    """(b) held-out MAPE per comm trace and model."""
    input:
        f"{RESULTS}/fit/fits.csv",
    output:
        pdf=f"{FIG}/fit-mape.pdf",
        png=reported(f"{FIG}/fit-mape.png", "fit-mape", "Cost models"),
    log:
        f"{LOGS}/figures/fit-mape.log",
    shell:
        "{GS} report figure fit-mape --fits {input} -o {output.pdf} --png {output.png} "
        "> {log} 2>&1"


rule figure_replay:
    """(c) iteration time per algorithm vs world size, one figure per compute family."""
    input:
        f"{RESULTS}/replay/main/replay.csv",
    output:
        pdf=f"{FIG}/replay-vs-world-size-{{family}}.pdf",
        png=report(
            f"{FIG}/replay-vs-world-size-{{family}}.png",
            caption="../report/replay-vs-world-size.rst",
            category="Replay",
            labels={"family": "{family}"},
        ),
    log:
        f"{LOGS}/figures/replay-vs-world-size-{{family}}.log",
    wildcard_constraints:
        # any family name: a family with no case in this configuration (e.g. the smoke
        # one) gets a figure that says so, so that the paper's includes always resolve
        family="[a-z0-9][a-z0-9-]*",
    shell:
        "{GS} report figure replay-vs-world-size --input {input} --family {wildcards.family} "
        "{CALIBRATED_LINK_ARGS} -o {output.pdf} --png {output.png} > {log} 2>&1"


rule figure_gpu_generations:
    """DDP's exposed communication and the best plan's gain over it, per GPU generation."""
    input:
        f"{RESULTS}/replay/main/replay.csv",
    output:
        pdf=f"{FIG}/gpu-generations.pdf",
        png=reported(f"{FIG}/gpu-generations.png", "gpu-generations", "Replay"),
    log:
        f"{LOGS}/figures/gpu-generations.log",
    shell:
        "{GS} report figure gpu-generations --input {input} {CALIBRATED_LINK_ARGS} "
        "-o {output.pdf} --png {output.png} > {log} 2>&1"


rule figure_timeline:
    """(d) replay timelines of a few algorithms on one case."""
    input:
        timeline_inputs(),
    output:
        pdf=f"{FIG}/timeline.pdf",
        png=reported(f"{FIG}/timeline.png", "timeline", "Replay"),
    log:
        f"{LOGS}/figures/timeline.log",
    params:
        title=lambda wc: (
            f"{config['timeline']['compute']} x {config['timeline']['network']} "
            f"({config['timeline']['comm']})"
        ),
    shell:
        "{GS} report figure timeline --input {input} --title {params.title:q} "
        "-o {output.pdf} --png {output.png} > {log} 2>&1"


rule figure_gaps:
    """(e) MG-WFBP vs the contiguous optimum; every algorithm's gap to the lower bound."""
    input:
        f"{RESULTS}/replay/main/replay.csv",
    output:
        pdf=f"{FIG}/gaps.pdf",
        png=reported(f"{FIG}/gaps.png", "gaps", "Replay"),
    log:
        f"{LOGS}/figures/gaps.log",
    shell:
        "{GS} report figure gaps --input {input} {CALIBRATED_LINK_ARGS} -o {output.pdf} "
        "--png {output.png} > {log} 2>&1"


rule figure_smoke:
    """The smoke target's one figure (iteration time vs world size, few algorithms)."""
    input:
        f"{RESULTS}/replay/smoke/replay.csv",
    output:
        pdf=f"{RESULTS}/smoke/replay-vs-world-size.pdf",
        png=f"{RESULTS}/smoke/replay-vs-world-size.png",
    log:
        f"{LOGS}/smoke/figure.log",
    shell:
        "{GS} report figure replay-vs-world-size --input {input} -o {output.pdf} "
        "--png {output.png} > {log} 2>&1"


rule fit_figures:
    """Figures (a) and (b) in one `gradsched batch` job (each as figure_fit_curves and
    figure_fit_mape, which still make one alone, run it): the work of each is less than
    the imports of a process."""
    input:
        comm=list(curve_traces().values()),
        models=curve_models(),
        fits=f"{RESULTS}/fit/fits.csv",
    output:
        curves_pdf=f"{FIG}/fit-curves.pdf",
        curves_png=reported(f"{FIG}/fit-curves.png", "fit-curves", "Cost models"),
        mape_pdf=f"{FIG}/fit-mape.pdf",
        mape_png=reported(f"{FIG}/fit-mape.png", "fit-mape", "Cost models"),
    log:
        f"{LOGS}/figures/fit.batch.log",
    params:
        jobs=lambda wc, input, output: batch_lines(
            [
                (
                    f"{LOGS}/figures/fit-curves.log",
                    f"report figure fit-curves --comm {' '.join(input.comm)} "
                    f"--models {' '.join(input.models)} --fits {input.fits} "
                    f"-o {output.curves_pdf} --png {output.curves_png}",
                ),
                (
                    f"{LOGS}/figures/fit-mape.log",
                    f"report figure fit-mape --fits {input.fits} -o {output.mape_pdf} "
                    f"--png {output.mape_png}",
                ),
            ]
        ),
    shell:
        BATCH


ruleorder: fit_figures > figure_fit_curves
ruleorder: fit_figures > figure_fit_mape
