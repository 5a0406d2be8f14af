"""Check that requirements.lock resolves on Linux x86_64, Linux aarch64 and macOS arm64.

pip's ``--platform`` selects wheels for another platform but evaluates environment markers on
the host (pip's ``install --dry-run --platform`` with markers: the host's ``sys_platform``), so
a plain ``pip install --dry-run --platform macosx_14_0_arm64 -r requirements.lock`` run on Linux
asks for torch's Linux-only CUDA wheels. This check therefore does, per platform:

1. evaluate each lock line's marker for the target platform (``packaging.markers``);
2. ``pip install --dry-run --no-deps --only-binary :all: --platform ...`` on the kept pins:
   every pin must have a wheel for that platform on PyPI (``--isolated`` and
   ``PIP_CONFIG_FILE=/dev/null``: no pip configuration file, so no local index or constraint
   of this machine's; the wheels resolved must all come from the index, none from a file);
3. walk the ``Requires-Dist`` of every resolved wheel (from pip's ``--report``), markers and
   extras evaluated for the target: every requirement must be met by a kept pin, and so must
   the dependencies and extras declared in pyproject.toml.

Pure-Python packages that PyPI ships as an sdist only (``SDIST_ONLY``) are built once into a
wheel, which must be tagged ``py3-none-any``, and offered with ``--find-links``.

Usage: ``python tools/check_lock.py [--python-version 3.11] [--lock requirements.lock]``.
Exit status 0 when every platform resolves; the last lines of pip's output are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
SDIST_ONLY = ("connection_pool==0.0.3",)
# pip reads the machine-wide configuration even with --isolated, unless this is os.devnull.
PIP_ENV = {**os.environ, "PIP_CONFIG_FILE": os.devnull}


@dataclass(frozen=True)
class Platform:
    """A target: pip ``--platform`` tags and the marker environment of its interpreter."""

    name: str
    tags: tuple[str, ...]
    system: str
    machine: str

    def environment(self, python: str) -> dict[str, str]:
        """Marker variables (PEP 508) of CPython ``python`` on this platform."""
        full = f"{python}.0"
        return {
            "implementation_name": "cpython",
            "implementation_version": full,
            "os_name": "posix",
            "platform_machine": self.machine,
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": self.system,
            "platform_version": "",
            "python_full_version": full,
            "python_version": python,
            "sys_platform": self.system.lower(),
            "extra": "",
        }


def _manylinux(arch: str) -> tuple[str, ...]:
    """glibc 2.28 (torch's floor) and every older manylinux tag; pip does not expand them."""
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(28, 16, -1)]
    return (*tags, f"manylinux2014_{arch}")


PLATFORMS = (
    Platform("linux-x86_64", _manylinux("x86_64"), "Linux", "x86_64"),
    Platform("linux-aarch64", _manylinux("aarch64"), "Linux", "aarch64"),
    Platform("macos-arm64", ("macosx_14_0_arm64",), "Darwin", "arm64"),
)


def read_lock(path: Path) -> list[Requirement]:
    """The pins of a lock file: one ``name==version[; marker]`` a line, ``#`` comments."""
    pins = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        req = Requirement(line)
        spec = list(req.specifier)
        if len(spec) != 1 or spec[0].operator != "==":
            raise SystemExit(f"{path}:{number}: not an exact pin: {raw!r}")
        pins.append(req)
    return pins


def kept_pins(pins: list[Requirement], env: dict[str, str]) -> dict[str, Requirement]:
    """Pins whose marker holds on the target, by canonical name."""
    return {
        canonicalize_name(p.name): p for p in pins if p.marker is None or p.marker.evaluate(env)
    }


def build_sdist_only(wheels: Path) -> None:
    """Build the sdist-only pins into ``wheels``; each must be a pure-Python wheel."""
    for spec in SDIST_ONLY:
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--isolated", "--no-deps"]
        cmd += ["-w", str(wheels), spec]
        subprocess.run(cmd, check=True, env=PIP_ENV)
    for wheel in wheels.glob("*.whl"):
        if not wheel.name.endswith("-py3-none-any.whl"):
            raise SystemExit(f"{wheel.name}: an sdist-only pin is not pure Python")


def dry_run(
    platform: Platform, python: str, reqs: Path, wheels: Path, report: Path
) -> tuple[list[str], str]:
    """pip's dry-run for ``platform``; returns the command and its output's last lines."""
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed"]
    cmd += ["--no-deps", "--only-binary", ":all:", "--python-version", python]
    cmd += ["--implementation", "cp", "--abi", f"cp{python.replace('.', '')}"]
    for tag in platform.tags:
        cmd += ["--platform", tag]
    cmd += ["--find-links", str(wheels), "--report", str(report), "-r", str(reqs)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=PIP_ENV)
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])
    if done.returncode != 0:
        raise SystemExit(f"{platform.name}: pip failed:\n{tail}")
    return cmd, tail


def unmet(
    resolved: dict[str, tuple[Version, list[str]]],
    roots: list[Requirement],
    env: dict[str, str],
) -> list[str]:
    """Requirements (roots and every resolved wheel's Requires-Dist) no resolved pin meets."""
    problems: list[str] = []
    extras: dict[str, set[str]] = {name: set() for name in resolved}
    todo: list[tuple[str, Requirement]] = [("lock/pyproject", r) for r in roots]
    for name, (_, deps) in resolved.items():
        todo += [(name, Requirement(d)) for d in deps]
    seen: set[tuple[str, str]] = set()
    while todo:
        owner, req = todo.pop()
        active = extras.get(canonicalize_name(owner), set()) or {""}
        if req.marker is not None and not any(
            req.marker.evaluate({**env, "extra": e}) for e in active
        ):
            continue
        key = canonicalize_name(req.name)
        if key not in resolved:
            problems.append(f"{owner} needs {req}: not in the lock for this platform")
            continue
        version = resolved[key][0]
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"{owner} needs {req}: the lock has {version}")
        for extra in req.extras - extras[key]:
            extras[key].add(extra)
            if (key, extra) not in seen:
                seen.add((key, extra))
                todo += [(key, Requirement(d)) for d in resolved[key][1]]
    return problems


def pyproject_requirements() -> list[Requirement]:
    """Every dependency and optional dependency that pyproject.toml declares (not itself)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for group in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in group]
    own = canonicalize_name(project["name"])
    return [r for r in reqs if canonicalize_name(r.name) != own]


def check(platform: Platform, python: str, lock: Path, wheels: Path, tmp: Path) -> list[str]:
    """Resolve ``lock`` for ``platform``; print the pip command and result; return problems."""
    env = platform.environment(python)
    pins = kept_pins(read_lock(lock), env)
    reqs = tmp / f"{platform.name}.txt"
    reqs.write_text("".join(f"{p.name}{p.specifier}\n" for p in pins.values()))
    report = tmp / f"{platform.name}.json"
    cmd, tail = dry_run(platform, python, reqs, wheels, report)
    installs = json.loads(report.read_text())["install"]
    resolved = {
        canonicalize_name(i["metadata"]["name"]): (
            Version(i["metadata"]["version"]),
            i["metadata"].get("requires_dist", []),
        )
        for i in installs
    }
    urls = [i["download_info"]["url"] for i in installs]
    files = sorted({url.rsplit("/", 1)[-1] for url in urls})
    local = [u for u in urls if u.startswith("file:") and str(wheels) not in u]
    roots = list(pins.values()) + pyproject_requirements()
    problems = unmet(resolved, roots, env)
    problems += [f"{url}: a local file, not from the index" for url in local]
    print(f"## {platform.name} (Python {python})\n")
    print("$ PIP_CONFIG_FILE=/dev/null " + " ".join(cmd) + "\n")
    print(tail + "\n")
    torch = [f for f in files if f.startswith("torch-")]
    print(f"{len(pins)} pins kept, {len(installs)} wheels resolved ({len(local)} local files)")
    print(f"torch: {', '.join(torch)}")
    print(f"Requires-Dist closure: {len(problems)} unmet\n")
    return [f"{platform.name}: {p}" for p in problems]


def main(argv: list[str] | None = None) -> int:
    """Check every platform; exit 1 if any requirement is unmet."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-version", default="3.11")
    parser.add_argument("--lock", type=Path, default=ROOT / "requirements.lock")
    args = parser.parse_args(argv)
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        wheels = tmp / "wheels"
        wheels.mkdir()
        build_sdist_only(wheels)
        for platform in PLATFORMS:
            problems += check(platform, args.python_version, args.lock, wheels, tmp)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
