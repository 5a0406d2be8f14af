"""Whether this machine can build the emulated cluster's network namespaces (shared by the
cluster, cluster-nodes and fault tests)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gradsched.distributed import netns


def netns_usable() -> str | None:
    """None when namespaces can be built here, else the reason they cannot."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (creates network namespaces)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2 (the ip and tc binaries)"
    if subprocess.run(["ip", "netns", "list"], capture_output=True, check=False).returncode:
        return "`ip netns` is unavailable here"
    return None


needs_netns = pytest.mark.skipif(netns_usable() is not None,
                                 reason=netns_usable() or "network namespaces usable")


def ours(prefix: str) -> list[str]:
    """The namespaces whose names start with ``prefix`` (a test's own)."""
    return [n for n in netns.list_namespaces() if n.startswith(prefix)]
