# Stage: replay beyond the sweeps. A network listed under config `extrapolate`
# gets a ring-scaled cross-world-size model (gradsched.costmodel.scaling.ScaledModel) fitted
# at `fit_on`; its cases are replayed on it at `world_sizes`, larger than any sweep. Every
# figure and table marks these points as extrapolated.


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


rule replay_extrapolated:
    """Plan and replay the configured algorithms at one world size beyond the sweeps."""
    input:
        compute=lambda wc: compute_path(wc.compute),
        model=f"{RESULTS}/extrapolate/{{network}}.scaled.json",
    output:
        f"{RESULTS}/replay/{{set}}/{{compute}}/{{network}}/extrapolated/p{{world}}.csv",
    log:
        f"{LOGS}/replay/{{set}}/{{compute}}/{{network}}/extrapolated/p{{world}}.log",
    wildcard_constraints:
        world="[0-9]+",
    params:
        algorithms=lambda wc: ",".join(set_algorithms(wc.set)),
        knobs=lambda wc: knob_args(set_algorithms(wc.set)),
        iterations=config.get("replay", {}).get("iterations", 5),
        channels=config.get("replay", {}).get("channels", 1),
    shell:
        "{GS} replay --compute {input.compute} --comm {input.model} "
        "--world-size {wildcards.world} --algorithms {params.algorithms} {params.knobs} "
        "--iterations {params.iterations} --channels {params.channels} -o {output} "
        "> {log} 2>&1"
