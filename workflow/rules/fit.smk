# Stage: cost models. Fit every comm trace; held-out error per file; cross-world-size error.


rule fit_files:
    """Fit the configured models to every comm trace, one table per file (one row per model,
    held-out MAPE), in one `gradsched batch` job."""
    input:
        list(fit_traces().values()),
    output:
        [f"{RESULTS}/fit/files/{stem}.csv" for stem in fit_traces()],
    log:
        f"{LOGS}/fit/files.log",
    params:
        jobs=batch_lines(
            (
                f"{LOGS}/fit/files/{stem}.log",
                f"fit {shlex.quote(path)} --model "
                f"{config.get('fit', {}).get('models', 'all')} "
                f"--table {RESULTS}/fit/files/{stem}.csv",
            )
            for stem, path in fit_traces().items()
        ),
    shell:
        BATCH


rule fit_models:
    """The fitted model JSONs drawn in the measured-vs-fitted figure, in one job."""
    input:
        list(curve_traces().values()),
    output:
        curve_models(),
    log:
        f"{LOGS}/fit/models.log",
    params:
        jobs=batch_lines(
            (
                f"{LOGS}/fit/models/{stem}.{kind}.log",
                f"fit {shlex.quote(curve_traces()[stem])} --model {kind} "
                f"-o {RESULTS}/fit/models/{stem}.{kind}.json",
            )
            for stem, kind in curve_model_kinds()
        ),
    shell:
        BATCH


rule fit_table:
    """All per-file fit tables in one CSV."""
    input:
        expand(f"{RESULTS}/fit/files/{{stem}}.csv", stem=fit_traces()),
    output:
        f"{RESULTS}/fit/fits.csv",
    log:
        f"{LOGS}/fit/fits.log",
    shell:
        "{GS} report concat {input} -o {output} > {log} 2>&1"


rule crossws_series:
    """Fit the ring formula (analytic) at some world sizes of a network series; predict the
    others (the two-level NCCL model is validated in nccl.smk)."""
    input:
        lambda wc: list(network_traces(wc.network).values()),
    output:
        f"{RESULTS}/fit/crossws/{{network}}.csv",
    log:
        f"{LOGS}/fit/crossws/{{network}}.log",
    params:
        fit_on=lambda wc: ",".join(map(str, crossws_series()[wc.network]["fit_on"])),
        algorithm=lambda wc: crossws_series()[wc.network].get("algorithm", "ring"),
    shell:
        "{GS} fit --cross-world-size {input} --fit-on {params.fit_on} "
        "--method analytic --algorithm {params.algorithm} --table {output} > {log} 2>&1"


rule crossws_table:
    """All cross-world-size tables in one CSV."""
    input:
        expand(f"{RESULTS}/fit/crossws/{{network}}.csv", network=crossws_series()),
    output:
        f"{RESULTS}/fit/crossws.csv",
    log:
        f"{LOGS}/fit/crossws.log",
    shell:
        "{GS} report concat {input} -o {output} > {log} 2>&1"
