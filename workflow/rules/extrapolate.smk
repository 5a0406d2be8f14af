# Stage: replay beyond the sweeps. A network listed under config `extrapolate`
# gets a ring-scaled cross-world-size model (gradsched.costmodel.scaling.ScaledModel) fitted
# at `fit_on`; its cases are replayed on it at `world_sizes`, larger than any sweep. Every
# figure and table marks these points as extrapolated. They are replayed with the network's
# other cases (the replay_cases_<set>_<network> jobs of replay.smk).


rule extrapolation_model:
    """The network's sweeps fitted at `fit_on` and scaled by the ring formula (JSON model)."""
    input:
        lambda wc: list(network_traces(wc.network).values()),
    output:
        f"{RESULTS}/extrapolate/{{network}}.scaled.json",
    log:
        f"{LOGS}/extrapolate/{{network}}.log",
    params:
        fit_on=lambda wc: ",".join(map(str, extrapolations()[wc.network]["fit_on"])),
    shell:
        "{GS} fit --cross-world-size {input} --fit-on {params.fit_on} --method scaled "
        "--algorithm ring -o {output} > {log} 2>&1"
