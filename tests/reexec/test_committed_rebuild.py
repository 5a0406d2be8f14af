"""The committed re-execution data rebuild byte for byte from their raw case folders.

``paper/data/reexec/`` and ``paper/data/reexec-accum/`` hold the measured iterations of each
case (``cases/<case>/``) and, in ``measured.csv``, those measurements next to the replay's
predictions. The predictions are computed, not measured: ``gradsched reexec collect``
recomputes them with the current replay. A change to the replay that moves a prediction
must republish ``measured.csv`` (the command in each folder's README), or the paper would
quote errors of a replay that no longer exists; this test fails until it is.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main

REPO = Path(__file__).resolve().parents[2]
REEXEC = Path("paper/data/reexec")
"""Relative to the repository, as the README's command names them (the provenance records
the paths it was given)."""


def _interference(networks: list[str], worlds: list[int]) -> list[str]:
    args = []
    for net in networks:
        for world in worlds:
            path = REEXEC / f"interference-{net}-p{world}.json"
            if (REPO / path).is_file():
                args += ["--interference", f"{net}-p{world}={path}"]
    return args


@pytest.mark.parametrize("folder,networks,worlds,outputs", [
    ("reexec", ["loopback", "tbf1gbit", "tbf100mbit"], [2, 3],
     ["measured.csv", "iterations.csv", "provenance.json"]),
    ("reexec-accum", ["loopback", "tbf1gbit"], [2],
     ["measured.csv", "iterations.csv", "provenance.json"]),
])
def test_committed_measured_rebuilds_byte_for_byte(folder: str, networks: list[str],
                                                   worlds: list[int], outputs: list[str],
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    data = Path("paper/data") / folder
    # the cases in the order the committed table lists them (the order they were collected)
    order = pd.read_csv(data / "measured.csv", usecols=["case"])["case"].drop_duplicates()
    cases = [str(data / "cases" / case) for case in order]
    assert main(["reexec", "collect", *cases, *_interference(networks, worlds),
                 "-o", str(tmp_path / "measured.csv"),
                 "--iterations-csv", str(tmp_path / "iterations.csv"),
                 "--provenance", str(tmp_path / "provenance.json")]) == 0
    for name in outputs:
        assert (tmp_path / name).read_bytes() == (data / name).read_bytes(), (
            f"paper/data/{folder}/{name} is not what its case folders rebuild to: "
            f"republish it (paper/data/{folder}/README.md)")
