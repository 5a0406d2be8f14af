"""The SLURM profile for real: a one-node SLURM cluster (Debian's slurm-wlm, started as root
in a private temporary folder by :mod:`tests.slurm_support`) runs a small target of the
pipeline with ``--profile profiles/slurm`` -- a replay, a fit and a CPU collective sweep --
and the outputs are compared with those of the local profile.

Checked: every job went through ``sbatch`` (slurmctld's records: one job per rule, the
plugin's ``rule_<name>`` comment, partition, CPUs per task, memory and time limit as the
profile and the rules ask; the job-completion log says COMPLETED on our node); the replay
and fit outputs equal the local profile's byte for byte, the sweep (a measurement) has the
same rows and columns; after the cluster is stopped no daemon, socket, munge key or spool
folder is left (no process names the cluster's folder, the folder is gone).

One test, so that ``pytest -n 2`` never starts two clusters; skipped with the reason where
the machine cannot run it (not root, no apt-get, the install or a daemon fails).
``--workflow-profile none``: without it Snakemake also loads ``profiles/default`` (the
workflow's own profile) over ``profiles/slurm``, and its ``executor: local`` wins: every job
ran locally (found by this test). The executor's job-status polling: ``squeue`` (there is
no slurmdbd, hence no ``sacct``; the cluster keeps finished jobs for ``MinJobAge``), first
check after 1 s instead of 40 s.
"""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.slurm_support import DAEMONS, OneNodeSlurm, ensure_slurm_installed, leftover_pids
from tests.workflow.test_workflow import SNAKEMAKE, copy_workflow

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("slurm"),
              pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake is not in the venv")]

FIT = "results/fit/models/bcaffe-osu-allreduce8.alpha-beta.json"
REPLAY = "results/replay/smoke/replay.csv"
SWEEP = "results/captured/comm/loopback/gs-tiny-2.csv"
TARGETS = (REPLAY, FIT, SWEEP)

# A sweep that takes seconds (config/capture.yaml's take minutes on two cores).
TINY_CAPTURE = {"capture": {
    "tiers": ["cpu"], "defaults": {"warmup": 1, "iters": 3, "threads": 1},
    "compute": [],
    "comm": {"loopback": [{"name": "gs-tiny-2", "backend": "gloo", "world_size": 2,
                           "collectives": "all_reduce", "min_bytes": "4", "max_bytes": "4K",
                           "factor": 16, "iters": 5, "warmup": 1, "min_iters": 2,
                           "time_budget_s": 0.2}]},
}}

# What each rule should ask sbatch for (profiles/slurm/config.yaml and the rules'
# resources): time limit, memory per node, CPUs per task.
EXPECTED = {
    "replay_cases_smoke_abci_a100_ib": ("01:00:00", "4000M", "1"),
    "collect_replay": ("00:30:00", "4000M", "1"),
    "fit_models": ("00:30:00", "4000M", "1"),
    "capture_comm_loopback": ("01:00:00", "4000M", "1"),
}


def _workdir(dest: Path) -> Path:
    wd = copy_workflow(dest)
    (wd / "config/capture.yaml").write_text(yaml.safe_dump(TINY_CAPTURE))
    return wd


def _snakemake(wd: Path, args: list[str], env: dict[str, str], timeout: float) -> str:
    proc = subprocess.run([str(SNAKEMAKE), *args, *TARGETS], cwd=wd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def test_pipeline_through_sbatch_equals_the_local_profile(tmp_path: Path) -> None:
    reason = ensure_slurm_installed()
    if reason:
        pytest.skip(f"SLURM tier: {reason}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    local = _workdir(tmp_path / "local")
    _snakemake(local, ["--profile", "profiles/default", "--cores", "2"], env, 300)

    t0 = time.monotonic()
    try:
        cluster = OneNodeSlurm.start()
    except RuntimeError as exc:
        pytest.skip(f"SLURM tier: the one-node cluster did not start: {exc}")
    root = cluster.root
    try:
        wd = _workdir(tmp_path / "slurm")
        out = _snakemake(wd, ["--profile", "profiles/slurm", "--workflow-profile", "none",
                              "--slurm-status-command", "squeue",
                              "--slurm-init-seconds-before-status-checks", "1"],
                         {**cluster.env(), "PYTHONPATH": env["PYTHONPATH"]}, 300)
        records = cluster.jobs()
        completions = cluster.completions()
    finally:
        cluster.stop()
    elapsed = time.monotonic() - t0

    # Every job went through sbatch, with the resources the profile and rules ask for.
    assert "sbatch" in out or "Job " in out, out[-2000:]
    by_rule: dict[str, list[dict[str, str]]] = {}
    for rec in records:
        rule = rec.get("Comment", "").removeprefix("rule_").split("_wildcards_")[0]
        by_rule.setdefault(rule, []).append(rec)
    assert set(by_rule) == set(EXPECTED), (sorted(by_rule), out[-2000:])
    for rule, (limit, mem, cpus) in EXPECTED.items():
        for rec in by_rule[rule]:
            assert rec["JobState"] == "COMPLETED", (rule, rec)
            assert rec["Partition"] == cluster.partition, (rule, rec)
            assert rec["TimeLimit"] == limit, (rule, rec["TimeLimit"])
            assert rec["MinMemoryNode"] == mem, (rule, rec["MinMemoryNode"])
            assert rec["CPUs/Task"] == cpus, (rule, rec["CPUs/Task"])
            assert rec["NodeList"] == cluster.node, (rule, rec["NodeList"])
    assert len(completions) == len(records), (completions, records)
    assert {c["JobState"] for c in completions} == {"COMPLETED"}, completions

    # Outputs: the deterministic ones byte for byte, the measurement by shape.
    for target in (REPLAY, FIT):
        assert filecmp.cmp(local / target, wd / target, shallow=False), target
    here, there = pd.read_csv(local / SWEEP), pd.read_csv(wd / SWEEP)
    assert list(here.columns) == list(there.columns)
    keys = [c for c in ("collective", "bytes", "world_size") if c in here.columns]
    assert keys, list(here.columns)
    pd.testing.assert_frame_equal(here[keys].reset_index(drop=True),
                                  there[keys].reset_index(drop=True))

    # Nothing left behind: no daemon, socket, munge key or spool folder.
    assert not root.exists(), sorted(p.name for p in root.rglob("*"))
    assert leftover_pids(root) == []
    assert all(p.poll() is not None for p in cluster.procs.values()), DAEMONS
    print(f"SLURM tier: cluster up, {len(records)} jobs, down in {elapsed:.0f} s",
          file=sys.stderr)
