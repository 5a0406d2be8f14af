# Stage: cost models. Fit every comm trace; held-out error per file; cross-world-size error.


rule fit_file:
    """Fit the configured models to one comm trace; one row per model (held-out MAPE)."""
    input:
        lambda wc: fit_traces()[wc.stem],
    output:
        f"{RESULTS}/fit/files/{{stem}}.csv",
    log:
        f"{LOGS}/fit/files/{{stem}}.log",
    params:
        models=config.get("fit", {}).get("models", "all"),
    shell:
        "{GS} fit {input} --model {params.models} --table {output} > {log} 2>&1"


rule fit_model:
    """One fitted model JSON (drawn in the measured-vs-fitted figure)."""
    input:
        lambda wc: fit_traces()[wc.stem],
    output:
        f"{RESULTS}/fit/models/{{stem}}.{{kind}}.json",
    log:
        f"{LOGS}/fit/models/{{stem}}.{{kind}}.log",
    shell:
        "{GS} fit {input} --model {wildcards.kind} -o {output} > {log} 2>&1"


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
