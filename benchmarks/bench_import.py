"""Import + validation time of every shipped external log (run: make bench).

One benchmark round imports all files listed in ``traces/manifest.yaml`` (40 logs; the
importers build validated CommTrace / ComputeTrace objects) without writing anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.traces.importers.manifest import load_manifest, run_entry
from tests.conftest import REPO, external_data_dir

MANIFEST = REPO / "traces" / "manifest.yaml"


@pytest.fixture(scope="module")
def external() -> Path:
    found = external_data_dir()
    if found is None:
        pytest.skip("the public measurements (data/external) are not present")
    return found


def _import_all(external: Path) -> int:
    rows = 0
    for entry in load_manifest(MANIFEST):
        result = run_entry(entry, external)
        for trace in (result.comm, result.compute):
            if trace is not None:
                rows += len(trace.frame)
    return rows


def test_import_every_shipped_log(benchmark, external: Path) -> None:
    rows = benchmark.pedantic(_import_all, args=(external,), rounds=3, iterations=1)
    assert rows > 2000


def test_cli_help_start_up(benchmark) -> None:
    """CPU seconds of ``gradsched --help`` in a fresh interpreter (the start-up every
    command line pays before its verb's module loads)."""
    import resource
    import subprocess
    import sys

    def run() -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "gradsched", "--help"], check=True,
                       capture_output=True, timeout=60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    cpu_s = benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["cpu_s"] = cpu_s
