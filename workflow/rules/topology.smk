# Stage: two-level topologies (docs/topology.md). The config's `topology_replay` replays GPU compute
# traces on the named `topologies` (flat vs hierarchical all-reduce; the measured all-ranks
# sweep of each cluster shape as the reference): one CSV and the topology-replay table
# (in `all` through TABLES). Seconds.


def topology_replay_spec():
    """(computes {name: CSV}, topologies {name: entry}, algorithms) of config
    `topology_replay`; every name must be configured."""
    spec = config.get("topology_replay") or {}
    topologies = config.get("topologies") or {}
    computes = {name: compute_path(name) for name in spec.get("compute", [])}
    chosen = {}
    for name in spec.get("topologies", []):
        if name not in topologies:
            _fail(
                f"topology_replay: unknown topology {name!r}; configured: "
                f"{', '.join(sorted(topologies)) or 'none'}"
            )
        chosen[name] = topologies[name]
    return computes, chosen, spec.get("algorithms", ["wfbp", "ddp", "mgwfbp"])


def topology_replay_inputs():
    computes, topologies, _ = topology_replay_spec()
    files = [
        f for t in topologies.values() for f in (t["file"], t.get("measured")) if f
    ]
    return sorted(set(computes.values()) | set(files))


def topology_replay_args():
    computes, topologies, algorithms = topology_replay_spec()
    args = [f"--compute {shlex.quote(n)} {shlex.quote(p)}" for n, p in computes.items()]
    for name, t in topologies.items():
        args.append(
            f"--topology {shlex.quote(name)} {shlex.quote(t['file'])} {t['collective']}"
        )
        if t.get("measured"):
            args.append(f"--measured {shlex.quote(name)} {shlex.quote(t['measured'])}")
    args.append(f"--algorithms {','.join(algorithms)}")
    return " ".join(args)


if topology_replay_spec()[0]:
    TABLES.append("topology-replay")


# GPU compute traces on 2 and 4 A100 nodes, flat vs hierarchical (in the report batch,
# before its table).
report_step(
    f"{LOGS}/topology/replay.log",
    f"study topology-replay {topology_replay_args()} "
    f"--replay-iters {config.get('replay', {}).get('iterations', 5)} -o {{output.csv}}",
    topology_replay_inputs(),
    csv=f"{RESULTS}/topology/replay.csv",
)


# Flat vs hierarchical iteration time per model, cluster shape and planner.
report_step(
    f"{LOGS}/tables/topology-replay.log",
    "report topology-replay-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'Flat vs hierarchical all-reduce on A100 nodes'",
    [f"{RESULTS}/topology/replay.csv"],
    tex=f"{TAB}/topology-replay.tex",
    md=reported(f"{TAB}/topology-replay.md", "topology-replay", "Architectures"),
)
