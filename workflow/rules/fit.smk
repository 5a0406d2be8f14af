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
    """Each network series fitted with the ring formula (analytic) at some world sizes, the
    others predicted (the two-level NCCL model is validated in nccl.smk), then all the
    tables in one CSV: one job."""
    input:
        sorted({t for n in crossws_series() for t in network_traces(n).values()}),
    output:
        [f"{RESULTS}/fit/crossws/{n}.csv" for n in crossws_series()],
        f"{RESULTS}/fit/crossws.csv",
    log:
        f"{LOGS}/fit/crossws.batch.log",
    params:
        jobs=batch_lines(
            [
                (
                    f"{LOGS}/fit/crossws/{n}.log",
                    f"fit --cross-world-size "
                    f"{' '.join(map(shlex.quote, network_traces(n).values()))} "
                    f"--fit-on {','.join(map(str, spec['fit_on']))} --method analytic "
                    f"--algorithm {spec.get('algorithm', 'ring')} "
                    f"--table {RESULTS}/fit/crossws/{n}.csv",
                )
                for n, spec in crossws_series().items()
            ]
            + [
                (
                    f"{LOGS}/fit/crossws.log",
                    "report concat "
                    + " ".join(
                        f"{RESULTS}/fit/crossws/{n}.csv" for n in crossws_series()
                    )
                    + f" -o {RESULTS}/fit/crossws.csv",
                )
            ]
        ),
    shell:
        BATCH
