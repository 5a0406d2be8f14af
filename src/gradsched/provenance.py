"""Provenance of a measurement: the machine and the software that produced it.

One implementation of each fact (CPU model, logical CPUs, load average, platform, python /
torch / numpy / gradsched versions, git commit). The outputs keep the keys they have
always written, so the records that gather facts differ by output:

* :func:`machine_info` -- ``machine`` of a compute capture or a profiled iteration
  (``capture compute``, ``capture iteration``): CPU, logical CPUs, torch threads, GPU;
* :func:`software_versions` -- ``software`` of those captures;
* :func:`comm_software_versions` -- ``software`` of a comm sweep (``capture comm``,
  ``bench collectives``): versions plus kernel, backend, NCCL and CUDA;
* :func:`machine_versions` -- ``machine`` of a re-execution (``reexec run``,
  ``reexec interference``): CPU, logical CPUs, platform and versions;
* the single facts (:func:`cpu_model`, :func:`load_average`, ...) for the ``environment``
  blocks of ``compress train`` / ``compress profile`` and the sweeps' ``hardware`` line.

Not to be confused with :func:`gradsched.traces.importers.read_provenance`, which parses
the provenance that an imported trace states about itself.

torch is imported only by the function that reports its version.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, overload

import numpy as np

import gradsched
from gradsched.procfs import read_pseudo

# ----------------------------------------------------------------------------- machine
PROC_CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_model() -> str | None:
    """The ``model name`` of /proc/cpuinfo (read by :func:`gradsched.procfs.read_pseudo`),
    or None (not Linux, or an architecture whose cpuinfo has no such line)."""
    for line in (read_pseudo(PROC_CPUINFO) or "").splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip() if ":" in line else None
    return None


def cpu_model(unknown: str = "unknown", *, machine_fallback: bool = False) -> str:
    """The CPU model name from /proc/cpuinfo; where there is none, ``platform.processor()``,
    then (with ``machine_fallback``) ``platform.machine()``, then ``unknown``.

    The fallbacks differ per output and are kept as each output always wrote them:
    compute captures ``"unknown"``; comm sweeps ``"unknown CPU"`` after the machine
    architecture; re-executions ``""``.
    """
    name = _cpuinfo_model()
    if name is not None:
        return name
    return (platform.processor() or (platform.machine() if machine_fallback else "")
            or unknown)


def logical_cpus() -> int | None:
    """Logical CPUs of this machine (``os.cpu_count()``)."""
    return os.cpu_count()


@overload
def load_average() -> list[float] | None: ...
@overload
def load_average(missing: list[float]) -> list[float]: ...
def load_average(missing: list[float] | None = None) -> list[float] | None:
    """The 1, 5 and 15 minute load averages rounded to 2 decimals; ``missing`` (None
    unless given, e.g. ``[]``) where the platform has none."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):  # pragma: no cover - not on Linux
        return missing


def platform_name() -> str:
    """``platform.platform()``: OS, kernel and libc in one string."""
    return platform.platform()


def architecture() -> str:
    """The machine architecture (``platform.machine()``: ``x86_64``, ``aarch64``)."""
    return platform.machine()


def hardware_summary() -> str:
    """``<CPU model> (<n> logical CPUs)``: the start of a comm sweep's ``hardware`` line."""
    return f"{cpu_model('unknown CPU', machine_fallback=True)} ({logical_cpus()} logical CPUs)"


def git_commit(cwd: str | Path) -> str:
    """The short commit of the git checkout at ``cwd`` ("" where there is none)."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd,
                          capture_output=True, text=True, check=False).stdout.strip()


# ----------------------------------------------------------------------------- software
def python_version() -> str:
    return platform.python_version()


def gradsched_version() -> str:
    return gradsched.__version__


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def numpy_version() -> str:
    return str(np.__version__)


def software_versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions of python, torch and friends (only those that are importable)."""
    out = {"python": python_version(), "gradsched": gradsched_version()}
    for name in ("torch", "numpy", "torchvision", *extra):
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = __import__(name)
            except ImportError:
                continue
        out[name] = str(getattr(mod, "__version__", "unknown"))
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_cuda"] = str(torch.version.cuda)
        if torch.cuda.is_available():
            out["cudnn"] = str(torch.backends.cudnn.version())
    return out


def comm_software_versions(backend: str) -> dict[str, str]:
    """Versions of what a collective sweep's numbers depend on."""
    import torch

    soft = {"gradsched": gradsched_version(), "python": python_version(),
            "torch": torch_version(), "kernel": platform.release(), "backend": backend}
    if backend == "nccl" and torch.cuda.is_available():
        with contextlib.suppress(Exception):
            soft["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
        soft["cuda"] = str(torch.version.cuda)
    return soft


# ----------------------------------------------------------------------------- records
def machine_info(device: str) -> dict[str, Any]:
    """What ran a capture: CPU model, logical CPUs, threads, GPU if any."""
    import torch

    info: dict[str, Any] = {
        "cpu_model": cpu_model(),
        "logical_cpus": logical_cpus(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "platform": platform_name(),
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info


def machine_versions() -> dict[str, Any]:
    """CPU, core count, software versions (the ``machine`` of a re-execution)."""
    return {"cpu_model": cpu_model(""), "logical_cpus": logical_cpus(),
            "platform": platform_name(), "python": python_version(),
            "torch": torch_version(), "numpy": numpy_version(),
            "gradsched": gradsched_version()}


__all__ = ["architecture", "comm_software_versions", "cpu_model", "git_commit",
           "gradsched_version", "hardware_summary", "load_average", "logical_cpus", "machine_info",
           "machine_versions", "numpy_version", "platform_name", "python_version",
           "software_versions", "torch_version"]
