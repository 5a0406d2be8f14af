# Stage: replay beyond the sweeps. A network listed under config `extrapolate`
# gets a ring-scaled cross-world-size model (gradsched.costmodel.scaling.ScaledModel) fitted
# at `fit_on`; its cases are replayed on it at `world_sizes`, larger than any sweep. Every
# figure and table marks these points as extrapolated. They are replayed with the network's
# other cases (the replay_cases_<set>_<network> jobs of replay.smk).


rule extrapolation_model:
    """Each network's sweeps fitted at `fit_on` and scaled by the ring formula (JSON
    models), in one job."""
    input:
        sorted({t for n in extrapolations() for t in network_traces(n).values()}),
    output:
        [f"{RESULTS}/extrapolate/{n}.scaled.json" for n in extrapolations()],
    log:
        f"{LOGS}/extrapolate/batch.log",
    params:
        jobs=batch_lines(
            (
                f"{LOGS}/extrapolate/{n}.log",
                f"fit --cross-world-size "
                f"{' '.join(map(shlex.quote, network_traces(n).values()))} "
                f"--fit-on {','.join(map(str, item['fit_on']))} --method scaled "
                f"--algorithm ring -o {RESULTS}/extrapolate/{n}.scaled.json",
            )
            for n, item in extrapolations().items()
        ),
    shell:
        BATCH
