"""Where the pipeline's CPU-seconds go: rule -> jobs -> user + sys seconds.

Two steps, so that a shared machine need not run the whole pipeline at once::

    python tools/cpu_by_rule.py run RULE [RULE ...]   # re-run those rules' jobs, one at a time
    python tools/cpu_by_rule.py table                  # rule | jobs | user_s | sys_s | cpu_s

``run`` makes Snakemake run every job of the named rules (``--forcerun RULE --until RULE``
on the target, default ``all``; one core, so jobs do not share it) with ``shell_exec`` set,
per rule, to a link named after the rule that points at ``tools/timed_shell.sh``: GNU time
then appends the job's user and system seconds (its command and every child process) to
``build/cpu/jobs.tsv``. Snakemake's own CPU time for the invocation (the DAG, its checks,
its bookkeeping: the process itself, not its jobs) is appended to ``build/cpu/snakemake.tsv``.
Outputs the jobs need must be up to date first (``snakemake --touch all`` after a copy, which
changes files' times); the re-run jobs rewrite their outputs in place, so check them after
(``tools/verify_outputs.py``).

``table`` sums ``jobs.tsv`` by rule (the latest ``run`` of a rule wins: earlier lines of a
rule that was run again are dropped), largest first, with the total; ``--target all`` keeps
only the rules that target's DAG has now (after rules were merged, say). CPU-seconds depend
little on the machine's load (unlike wall time) but not at all: caches and frequency scaling
on a busy machine cost some; note ``uptime`` beside a measurement.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_DIR = ROOT / "build" / "cpu"
SHELL = ROOT / "tools" / "timed_shell.sh"


def _run(rules: list[str], target: str, extra: list[str], log: Path) -> int:
    bin_dir = CPU_DIR / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    # A rule run again replaces its earlier lines (see `table`): mark where this run starts.
    with log.open("a") as f:
        for rule in rules:
            f.write(f"#run\t{rule}\n")
    set_resources = []
    for rule in rules:
        link = bin_dir / rule
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(SHELL)
        set_resources.append(f"{rule}:shell_exec='{link}'")
    snakemake = str(Path(sys.executable).parent / "snakemake")
    cmd = [
        snakemake, target, "--profile", "profiles/default", "--cores", "1",
        "--rerun-triggers", "mtime", "--forcerun", *rules, "--until", *rules,
        *extra, "--set-resources", *set_resources,
    ]  # fmt: skip
    env = dict(os.environ, GRADSCHED_CPU_LOG=str(log))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    jobs = _read_jobs(log, set(rules))
    job_cpu = sum(u + s for u, s in ((r[1], r[2]) for r in jobs))
    total = usage.ru_utime + usage.ru_stime
    with (log.parent / "snakemake.tsv").open("a") as f:
        f.write(f"{' '.join(rules)}\t{len(jobs)}\t{total:.2f}\t{total - job_cpu:.2f}\n")
    print(
        f"{len(jobs)} jobs: {job_cpu:.1f} CPU-s in jobs, "
        f"{total - job_cpu:.1f} CPU-s in Snakemake itself; load {os.getloadavg()[0]:.2f}"
    )
    return rc


def _read_jobs(log: Path, only: set[str] | None = None) -> list[tuple[str, float, float, float]]:
    """The latest run's job lines per rule: (rule, user_s, sys_s, wall_s)."""
    latest: dict[str, list[tuple[str, float, float, float]]] = defaultdict(list)
    if not log.exists():
        return []
    for line in log.read_text().splitlines():
        fields = line.split("\t")
        if fields[0] == "#run":
            latest[fields[1]] = []
            continue
        if len(fields) != 4:
            continue  # GNU time's "Command exited with non-zero status" lines
        rule, user, sys_s, wall = fields
        latest[rule].append((rule, float(user), float(sys_s), float(wall)))
    rows = [row for rule, lines in latest.items() for row in lines]
    return [r for r in rows if only is None or r[0] in only]


def dag_rules(target: str) -> set[str]:
    """The rules of ``target``'s whole DAG (a dry run with --forceall: its job stats)."""
    snakemake = str(Path(sys.executable).parent / "snakemake")
    out = subprocess.run([snakemake, "-n", "--forceall", target], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    rules = set()
    for line in out[out.index("Job stats:"):].splitlines()[3:]:
        if not line.split() or line.split()[0] == "total":
            break
        rules.add(line.split()[0])
    return rules


def _table(log: Path, target: str | None) -> None:
    keep = dag_rules(target) if target else None
    by_rule: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for rule, user, sys_s, wall in _read_jobs(log):
        if keep is not None and rule not in keep:
            continue  # a rule the workflow no longer has (measured before a change)
        agg = by_rule[rule]
        agg[0] += 1
        agg[1] += user
        agg[2] += sys_s
        agg[3] += wall
    rows = sorted(by_rule.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))
    print(f"| {'rule':<40} | jobs | user_s | sys_s |  cpu_s | wall_s |")
    print(f"|{'-' * 42}|-----:|-------:|------:|-------:|-------:|")
    totals = [sum(agg[k] for _, agg in rows) for k in range(4)]
    for rule, (n, user, sys_s, wall) in [*rows, ("total", totals)]:
        print(f"| {rule:<40} | {n:4d} | {user:6.1f} | {sys_s:5.1f} | "
              f"{user + sys_s:6.1f} | {wall:6.1f} |")

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    run = sub.add_parser("run", help="re-run the named rules' jobs, timing each")
    run.add_argument("rules", nargs="+")
    run.add_argument("--target", default="all")
    run.add_argument("--snakemake-arg", action="append", default=[], dest="extra")
    run.add_argument("--log", type=Path, default=CPU_DIR / "jobs.tsv",
                     help="where the jobs' lines go (snakemake.tsv beside it)")
    table = sub.add_parser("table", help="CPU-seconds by rule from build/cpu/jobs.tsv")
    table.add_argument("--log", type=Path, default=CPU_DIR / "jobs.tsv")
    table.add_argument("--target", help="only the rules of this target's DAG (a dry run)")
    args = parser.parse_args(argv)
    if args.verb == "run":
        return _run(args.rules, args.target, args.extra, args.log.resolve())
    _table(args.log, args.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
