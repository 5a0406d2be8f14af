# Stage: all-reduce vs parameter servers. The config's `ps_replay` replays CPU
# compute traces on the all-reduce sweep of each network and on a BytePS-style parameter
# server priced from the point-to-point sweep of the same links: one CSV and the ps-replay
# table (in `all` through TABLES). Seconds.


def ps_replay_cases():
    """(name, trace, network, P, all-reduce sweep, p2p sweep) of config `ps_replay`."""
    spec = config.get("ps_replay") or {}
    cases = []
    for name in spec.get("compute", []):
        for net, paths in (spec.get("networks") or {}).items():
            for world in spec.get("world_sizes", []):
                cases.append(
                    (
                        name,
                        compute_path(name),
                        net,
                        int(world),
                        paths["allreduce"].format(P=int(world)),
                        paths["p2p"],
                    )
                )
    return cases


def ps_replay_args():
    spec = config.get("ps_replay") or {}
    args = [
        "--case " + " ".join(shlex.quote(str(v)) for v in case)
        for case in ps_replay_cases()
    ]
    args += [f"--layout {shlex.quote(str(v))}" for v in spec.get("layouts", [])]
    return " ".join(args)


if ps_replay_cases():
    TABLES.append("ps-replay")
ARCH_DATA = "paper/data/reexec/architectures/measured.json"
TABLES.append("architectures")


rule ps_replay:
    """CPU traces on all-reduce and on parameter servers."""
    input:
        sorted({p for c in ps_replay_cases() for p in (c[1], c[4], c[5])}),
    output:
        f"{RESULTS}/ps/replay.csv",
    log:
        f"{LOGS}/ps/replay.log",
    params:
        args=ps_replay_args(),
        iterations=config.get("replay", {}).get("iterations", 5),
    shell:
        "{GS} study ps-replay {params.args} --replay-iters {params.iterations} "
        "-o {output} > {log} 2>&1"


# Iteration time per planner on all-reduce and on each server layout.
report_step(
    f"{LOGS}/tables/ps-replay.log",
    "report ps-replay-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'All-reduce vs parameter servers (replay)'",
    [f"{RESULTS}/ps/replay.csv"],
    tex=f"{TAB}/ps-replay.tex",
    md=reported(f"{TAB}/ps-replay.md", "ps-replay", "Architectures"),
)


# Hierarchical all-reduce and a parameter server run for real (committed data).
report_step(
    f"{LOGS}/tables/architectures.log",
    "report architectures --input {input} --tex {output.tex} --md {output.md} "
    "--title 'Hierarchical and parameter-server runs (emulated cluster)'",
    [ARCH_DATA],
    tex=f"{TAB}/architectures.tex",
    md=reported(f"{TAB}/architectures.md", "architectures", "Architectures"),
)
