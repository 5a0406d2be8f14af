"""Network namespaces through iproute2 (``ip netns``): run ``ip``/``tc``, check that
they can be used, list namespaces, and tell a namespace's identity (its nsfs inode) and the
processes inside it. The error of everything about the emulated cluster,
:class:`ClusterError`, is defined here."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from gradsched.errors import GradschedError

NETNS_DIR = Path("/run/netns")  # where `ip netns add` bind-mounts a namespace (iproute2)


class ClusterError(GradschedError, RuntimeError):
    """The emulated cluster could not be set up (or torn down)."""


def run_ip(cmd: Sequence[str], *, check: bool = True, timeout: float = 20.0) -> str:
    """Run an iproute2 command; a failure raises :class:`ClusterError` with its stderr."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise ClusterError(f"{cmd[0]!r} not found: the emulated cluster needs iproute2 "
                           "(ip, tc)") from exc
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{' '.join(cmd)} did not finish within {timeout:g} s") from exc
    if check and proc.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)} failed (exit {proc.returncode}): "
                           f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def preflight() -> None:
    """Raise a clear :class:`ClusterError` unless we are root and ``ip netns`` works."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        raise ClusterError("the emulated cluster needs Linux network namespaces")
    if os.geteuid() != 0:
        raise ClusterError("the emulated cluster needs root (it creates network namespaces, "
                           "veth links and tc qdiscs); run it as root, e.g. with sudo")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise ClusterError(f"{tool!r} not found: the emulated cluster needs iproute2")
    run_ip(["ip", "netns", "list"])


def list_namespaces() -> list[str]:
    """Names of the network namespaces that ``ip netns`` knows."""
    out = run_ip(["ip", "netns", "list"])
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(name: str) -> list[int]:
    """The processes running inside the network namespace ``name`` (``ip netns pids``)."""
    out = run_ip(["ip", "netns", "pids", name], check=False)
    return [int(tok) for tok in out.split() if tok.isdigit()]


def namespace_inode(name: str) -> int | None:
    """The identity (nsfs inode) of the namespace mounted as ``name``, or None if absent."""
    try:
        return (NETNS_DIR / name).stat().st_ino
    except OSError:
        return None


__all__ = ["NETNS_DIR", "ClusterError", "list_namespaces", "namespace_inode", "namespace_pids",
           "preflight", "run_ip"]
