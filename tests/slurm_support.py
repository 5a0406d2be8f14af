"""A one-node SLURM cluster for the ``slurm`` test tier: Debian's ``slurm-wlm`` (22.05),
started as root in a private temporary folder and torn down without a trace.

Everything the cluster uses lives under one folder ``/tmp/gs-slurm-<id>``: the munge key,
munged's socket, pid, seed and log, ``slurm.conf``, slurmctld's state, slurmd's spool, the
pid and log files and the job-completion records. Both SLURM daemons and munged run in the
foreground (``-D``/``-F``) as children of the test, so their process ids are known; ports
are free ones picked at start; the cluster and node names carry the id, so that two test
runs on the same machine never share anything. Clients (``sbatch``, ``squeue``,
``scontrol``, ``sacct``) find the cluster through ``SLURM_CONF``; munge's socket is named in
``slurm.conf`` (``AuthInfo=socket=...``, slurm.conf(5)).

There is no ``slurmdbd``: ``AccountingStorageType=accounting_storage/none``, and
``JobCompType=jobcomp/filetxt`` writes one line per finished job (its id, name, state,
CPUs, node) to ``jobcomp.txt``; slurmctld's own records (``scontrol show job``) hold the
requested resources as long as ``MinJobAge`` keeps finished jobs (set to an hour here).
The node's CPUs and memory are those ``slurmd -C`` reports for this machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurm-wlm", "slurm-client", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_slurm_installed(timeout_s: float = 600.0) -> str | None:
    """None when slurmctld, slurmd, munged and the clients are here (installed with apt
    when missing and root), else the reason they are not."""
    needed = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scontrol")
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (installs slurm-wlm with apt and starts its daemons)"
    if all(shutil.which(b) for b in needed):
        return None
    if shutil.which("apt-get") is None:
        return "slurm-wlm is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]):
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(cmd)}` did not finish in {timeout_s:.0f} s"
        if proc.returncode:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return f"`{' '.join(cmd)}` failed: {' | '.join(tail)}"
    missing = [b for b in needed if not shutil.which(b)]
    return f"installed {', '.join(PACKAGES)} but {missing} are still missing" if missing else None


def node_facts() -> dict[str, int]:
    """CPUs and RealMemory (MB) of this machine, as ``slurmd -C`` reports them."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    facts = dict(re.findall(r"(\w+)=(\S+)", out.splitlines()[0]))
    return {"cpus": int(facts["CPUs"]), "memory_mb": int(facts["RealMemory"]),
            "sockets": int(facts.get("SocketsPerBoard", 1)),
            "cores_per_socket": int(facts.get("CoresPerSocket", facts["CPUs"])),
            "threads_per_core": int(facts.get("ThreadsPerCore", 1))}


@dataclass
class OneNodeSlurm:
    """A started one-node cluster (see the module docstring); :meth:`stop` removes it."""

    root: Path
    ident: str
    ports: tuple[int, int]
    facts: dict[str, int]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    partition: str = "cpu"

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def node(self) -> str:
        return f"gsnode{self.ident}"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket.2"

    @property
    def munge_key(self) -> Path:
        return self.root / "munge" / "munge.key"

    def env(self) -> dict[str, str]:
        """The environment for SLURM clients (and Snakemake) to use this cluster: SLURM_CONF,
        and ``bin/`` first on PATH (its ``srun`` sets SLURM_CONF again, see :meth:`_shims`)."""
        path = f"{self.root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": path}

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=self.env(), capture_output=True, text=True,
                              timeout=timeout, check=False)

    # -- start ---------------------------------------------------------------------------

    @classmethod
    def start(cls, timeout_s: float = 60.0) -> OneNodeSlurm:
        ident = uuid.uuid4().hex[:8]
        root = Path(f"/tmp/gs-slurm-{ident}")
        root.mkdir(mode=0o700)
        cluster = cls(root=root, ident=ident, ports=(_free_port(), _free_port()),
                      facts=node_facts())
        try:
            cluster._start_munge()
            cluster._write_conf()
            cluster._start_slurm(timeout_s)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.stdout", "wb")  # noqa: SIM115 (kept by Popen)
        with log:
            self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, env=self.env(),
                                                start_new_session=True)

    def _shims(self) -> None:
        """``bin/srun``: the real srun with SLURM_CONF set. Inside a job, the Snakemake
        jobstep plugin runs each rule as ``srun -n1 ...`` with every SLURM_* variable but the
        job's identity removed (snakemake_executor_plugin_slurm_jobstep, ``keep_slurm``),
        so srun looks for /etc/slurm/slurm.conf, then for DNS SRV records, and fails
        ("Could not establish a configuration source"). A real cluster has its
        configuration at the default place or served by slurmctld (configless); this private
        one has neither, so that it never touches the machine's /etc or /run."""
        real = shutil.which("srun") or "/usr/bin/srun"
        shim = self.root / "bin" / "srun"
        shim.write_text(f"#!/bin/sh\nSLURM_CONF={self.conf} exec {real} \"$@\"\n")
        shim.chmod(0o700)

    def _start_munge(self) -> None:
        for sub in ("munge", "etc", "log", "state", "spool", "bin"):
            (self.root / sub).mkdir(mode=0o700)
        self._shims()
        subprocess.run(["mungekey", "--create", "--keyfile", str(self.munge_key)],
                       check=True, capture_output=True, timeout=30)
        self.munge_key.chmod(0o400)
        munge = self.root / "munge"
        self._spawn("munged", ["munged", "--foreground", "--force",
                               f"--key-file={self.munge_key}",
                               f"--socket={self.munge_socket}",
                               f"--pid-file={munge / 'munged.pid'}",
                               f"--log-file={munge / 'munged.log'}",
                               f"--seed-file={munge / 'munged.seed'}"])
        deadline = time.monotonic() + 15
        while not self.munge_socket.exists():
            if self.procs["munged"].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start: {self._tail('munged')}")
            time.sleep(0.1)

    def _write_conf(self) -> None:
        f, r = self.facts, self.root
        lines = [
            f"ClusterName=gs{self.ident}",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.ports[0]}",
            f"SlurmdPort={self.ports[1]}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={r / 'log' / 'jobcomp.txt'}",
            "MinJobAge=3600",
            "ReturnToService=2",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            f"NodeName={self.node} NodeHostname=localhost NodeAddr=127.0.0.1 "
            f"CPUs={f['cpus']} SocketsPerBoard={f['sockets']} "
            f"CoresPerSocket={f['cores_per_socket']} ThreadsPerCore={f['threads_per_core']} "
            f"RealMemory={f['memory_mb']} State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={self.node} Default=YES "
            "MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def _start_slurm(self, timeout_s: float) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
        deadline = time.monotonic() + timeout_s
        while True:
            for name in ("slurmctld", "slurmd"):
                if self.procs[name].poll() is not None:
                    raise RuntimeError(f"{name} exited: {self._tail(name)}")
            proc = self.run("sinfo", "-h", "-N", "-o", "%N %t")
            if proc.returncode == 0 and re.search(rf"{self.node} idle\b", proc.stdout):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the node did not come up in {timeout_s:.0f} s "
                                   f"(sinfo: {proc.stdout.strip() or proc.stderr.strip()}); "
                                   f"slurmctld: {self._tail('slurmctld')}; "
                                   f"slurmd: {self._tail('slurmd')}")
            time.sleep(0.5)

    def _tail(self, name: str) -> str:
        texts = []
        for path in (self.root / "log" / f"{name}.stdout", self.root / "log" / f"{name}.log",
                     self.root / "munge" / f"{name}.log"):
            with contextlib.suppress(OSError):
                texts.append(path.read_text(errors="replace").strip())
        return " | ".join(t.splitlines()[-1] for t in texts if t)[-600:]

    # -- records ---------------------------------------------------------------------------

    def job(self, job_id: str) -> dict[str, str]:
        """slurmctld's record of one job (``scontrol show job -o``) as key -> value."""
        out = self.run("scontrol", "show", "job", "-o", job_id).stdout
        return dict(re.findall(r"(\S+?)=(\S*)", out))

    def jobs(self) -> list[dict[str, str]]:
        """slurmctld's records of every job it knows (finished ones kept by MinJobAge)."""
        out = self.run("scontrol", "show", "job", "-o").stdout
        return [dict(re.findall(r"(\S+?)=(\S*)", line)) for line in out.splitlines()
                if line.startswith("JobId=")]

    def completions(self) -> list[dict[str, str]]:
        """The job-completion records (jobcomp/filetxt): one dict per finished job."""
        path = self.root / "log" / "jobcomp.txt"
        if not path.exists():
            return []
        return [dict(re.findall(r"(\S+?)=(\S*)", line))
                for line in path.read_text().splitlines() if line.strip()]

    # -- stop ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Cancel every job, stop the daemons (TERM, then KILL), remove the folder."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            with contextlib.suppress(Exception):
                self.run("scancel", "--full", "-u", "root", timeout=10)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # slurmstepd of a job outlives slurmd; it runs in its own session: find it by its
        # spool folder and kill it by id.
        for pid in leftover_pids(self.root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


def leftover_pids(root: Path) -> list[int]:
    """Processes whose command line or open files name ``root`` (none after a clean stop)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        hit = str(root) in cmdline
        if not hit:
            with contextlib.suppress(OSError):
                hit = any(str(root) in os.readlink(fd) for fd in (proc / "fd").iterdir())
        if hit:
            found.append(int(proc.name))
    return found
