# Stage: paper. Reproduced-vs-published checks, prose macros, and the PDF (latexmk).


def compare_inputs():
    ext = external_dir()
    out = {"traces": [trace for _, trace in nccl_pairs()]}
    out["logs"] = [str(ext / log) for log, _ in nccl_pairs()] if ext else []
    if ext:
        out["logs"] += [str(ext / item["log"]) for item in bcaffe_checks().values()]
        out["bcaffe"] = expand(
            f"{RESULTS}/compare/bcaffe/{{stem}}.csv", stem=bcaffe_checks()
        )
    else:
        out["bcaffe"] = []
    return out


def compare_args():
    ext = external_dir()
    args = []
    for log, trace in nccl_pairs():
        if ext:
            args.append(f"--nccl {shlex.quote(str(ext / log))} {shlex.quote(trace)}")
        else:
            args.append(
                f"--skip nccl-busbw {Path(trace).stem} 'external log {log} not found'"
            )
    for stem, item in bcaffe_checks().items():
        if ext:
            args.append(
                f"--bcaffe {shlex.quote(str(ext / item['log']))} "
                f"{RESULTS}/compare/bcaffe/{stem}.csv {stem}"
            )
        else:
            args.append(
                f"--skip bcaffe-merge {stem} 'external log {item['log']} not found'"
            )
    return " ".join(args)


rule compare_numbers:
    """Reproduced vs published numbers with tolerances (skipped rows without the logs)."""
    input:
        unpack(lambda wc: compare_inputs()),
    output:
        f"{RESULTS}/compare/compare.csv",
    log:
        f"{LOGS}/compare/compare.log",
    params:
        args=compare_args(),
    shell:
        "{GS} report compare {params.args} -o {output} > {log} 2>&1"


rule macros:
    """\\newcommand for every number the paper's prose quotes."""
    input:
        fits=f"{RESULTS}/fit/fits.csv",
        crossws=f"{RESULTS}/fit/crossws.csv",
        replay=f"{RESULTS}/replay/main/replay.csv",
        compare=f"{RESULTS}/compare/compare.csv",
        reexec="paper/data/reexec/measured.csv",
        reexec_stats=f"{RESULTS}/reexec-committed/stats.csv",
        reexec_iterations="paper/data/reexec/iterations.csv",
        headline_models=expand(
            f"{RESULTS}/replay/headline-models/{{kind}}.csv", kind=HEADLINE_MODEL_KINDS
        ),
        captured=f"{RESULTS}/traces/captured.csv",
        host_check=f"{RESULTS}/h200/host-check.csv",
        sharded_measured=(
            [f"{RESULTS}/sharded/measured.csv"] if SHARDED_MEASURED else []
        ),
        calibrated=[
            f"{RESULTS}/replay/calibrated/{c}/{link}-p{w}.csv"
            for c, link, w in CALIBRATED_CASES
        ],
        architectures="paper/data/reexec/architectures/measured.json",
        executor_bench="paper/data/reexec/bench-executor-vs-ddp.json",
        gpu_kineto="data/h200/kineto-import-report.csv",
        gpu_corrections="data/h200/correction-report.csv",
        # the GPU captures as measured (their hooks' overhead; not the corrected bundles)
        gpu_captures=sorted(
            path
            for path in glob.glob("traces/compute/h200/*.meta.json")
            if not path.endswith("-corrected.meta.json")
        ),
        # committed traces whose facts the prose quotes (report/trace_facts.py, burst.py)
        compute_traces=[
            "traces/compute/cpu/resnet50-b2-cpu-fp32.csv",
            "traces/compute/cpu/mobilenet_v2-b8-cpu-fp32.csv",
            "traces/compute/cpu/resnet18-b4-cpu-fp32.csv",
            "traces/compute/kineto-gpu/resnet50-a100-ddp2-b32.csv",
            "traces/compute/sailor/gpt-neo-2.7b-a100-40-mb1-tp1.csv",
        ],
        sweeps=[
            "traces/comm/cpu/gloo-tbf1gbit-p2.csv",
            "traces/comm/cpu/gloo-tbf100mbit-p2.csv",
        ],
        burst_sweep="traces/comm/cpu/gloo-tbf100mbit-p2.csv",
    output:
        f"{GEN}/macros.tex",
    log:
        f"{LOGS}/paper/macros.log",
    params:
        headline_models=lambda wc, input: " ".join(
            f"--headline-model {k} {p}"
            for k, p in zip(HEADLINE_MODEL_KINDS, input.headline_models)
        ),
        sharded_measured=lambda wc, input: " ".join(
            f"--sharded-measured {p}" for p in input.sharded_measured
        ),
        calibrated=lambda wc, input: " ".join(
            f"--calibrated-replay {p}" for p in input.calibrated
        ),
        gpu_captures=lambda wc, input: " ".join(
            f"--gpu-capture {shlex.quote(path)}" for path in input.gpu_captures
        ),
        traces=lambda wc, input: " ".join(
            [f"--compute-trace {shlex.quote(path)}" for path in input.compute_traces]
            + [f"--sweep {shlex.quote(path)}" for path in input.sweeps]
        ),
        headline=" ".join(
            f"--headline-{key.replace('_', '-')} {shlex.quote(str(value))}"
            for key, value in (
                ("trace", config.get("report", {}).get("headline", {}).get("compute")),
                (
                    "network",
                    config.get("report", {}).get("headline", {}).get("network"),
                ),
                (
                    "world_size",
                    config.get("report", {}).get("headline", {}).get("world_size"),
                ),
            )
            if value is not None
        ),
    shell:
        "{GS} report macros --fits {input.fits} --crossws {input.crossws} "
        "--replay {input.replay} --compare {input.compare} --reexec {input.reexec} "
        "--reexec-stats {input.reexec_stats} --reexec-iterations {input.reexec_iterations} "
        "--architectures {input.architectures} "
        "--executor-bench {input.executor_bench} {params.gpu_captures} {params.headline} "
        "{params.headline_models} --headline-comm {HEADLINE_COMM_STEM} {params.calibrated} "
        "--captured {input.captured} {params.sharded_measured} "
        "--host-check {input.host_check} "
        "--gpu-kineto {input.gpu_kineto} --gpu-corrections {input.gpu_corrections} "
        "{params.traces} --burst-sweep {input.burst_sweep} "
        "-o {output} > {log} 2>&1"


rule claims:
    """The README's claims with their numbers, from the paper's own macros."""
    input:
        f"{GEN}/macros.tex",
    output:
        f"{GEN}/claims.md",
    log:
        f"{LOGS}/paper/claims.log",
    shell:
        "{GS} report claims --macros {input} -o {output} > {log} 2>&1"


def paper_includes():
    """Every figure and table file paper/main.tex and its sections include (from the .tex
    itself, so that the PDF waits for the rules of every stage that draws one, whichever
    .smk has them).
    """
    import re

    source = Path("paper/main.tex")
    if not source.is_file():  # a working copy without the paper (e.g. the smoke test)
        return []
    text = "\n".join(
        p.read_text(encoding="utf-8")
        for p in [source, *sorted(Path("paper/sections").glob("*.tex"))]
    )
    figures = re.findall(r"\\includegraphics(?:\[[^\]]*\])?\{(figures/[^}]+)\}", text)
    tables = re.findall(r"\\input\{(tables/[^}]+)\}", text)
    # a replay-<family> table exists only for the families this configuration replays
    tables = [
        t
        for t in tables
        if not t.startswith("tables/replay-") or t[len("tables/") :] in TABLES
    ]
    return sorted(
        {f"{FIG}/{name[len('figures/'):]}" for name in figures}
        | {f"{TAB}/{name[len('tables/'):]}" for name in tables}
    )


PAPER_INPUTS = (
    ["paper/main.tex", "paper/references.bib", f"{GEN}/macros.tex"]
    + sorted(glob.glob("paper/sections/*.tex"))
    + [
        f"{GEN}/scaling-macros.tex",
        f"{GEN}/overlap-macros.tex",
        f"{GEN}/at-scale-macros.tex",
        f"{GEN}/at-scale-decompose-macros.tex",
        f"{GEN}/hsdp-macros.tex",
    ]
    + figure_files()
    + table_files()
    + [f for f in paper_includes() if f not in figure_files() + table_files()]
)


if latex_available() and PAPER_DIR == "paper":

    rule paper_pdf:
        """paper/main.pdf with latexmk (aux files under build/paper/)."""
        input:
            PAPER_INPUTS,
        output:
            "paper/main.pdf",
        log:
            f"{LOGS}/paper/latexmk.log",
        shell:
            "mkdir -p build/paper && cd paper && SOURCE_DATE_EPOCH=0 FORCE_SOURCE_DATE=1 "
            "latexmk -pdf -interaction=nonstopmode -halt-on-error -outdir=../build/paper "
            "main.tex > ../{log} 2>&1 && cd .. && {GS} report latex-check build/paper/main.log "
            ">> {log} 2>&1 && cp build/paper/main.pdf paper/main.pdf.tmp "
            "&& chmod a+r paper/main.pdf.tmp && mv paper/main.pdf.tmp paper/main.pdf "
            "&& rm -f {RESULTS}/paper/NO-PDF.txt"

    PAPER_TARGET = ["paper/main.pdf"]

else:

    rule paper_no_latex:
        """No latexmk: stop after figures, tables and macros, and say so."""
        input:
            PAPER_INPUTS[2:],
        output:
            f"{RESULTS}/paper/NO-PDF.txt",
        log:
            f"{LOGS}/paper/no-latex.log",
        shell:
            "echo 'paper: latexmk not found (or paper.latex: never); figures, tables and "
            "macros are in paper/figures, paper/tables, paper/generated. Install TeX "
            "(make tex) and rerun: snakemake --profile profiles/default paper' "
            "| tee {output} {log} >&2"

    PAPER_TARGET = [f"{RESULTS}/paper/NO-PDF.txt"]
