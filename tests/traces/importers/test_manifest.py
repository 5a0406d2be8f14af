"""The import manifest: its checks, the shipped files it lists, and a byte-identical reimport."""

from __future__ import annotations

import filecmp
import re
from pathlib import Path

import pytest

from gradsched.errors import InputError
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.importers.manifest import load_captured, load_manifest, run_manifest

REPO = Path(__file__).resolve().parents[3]


MANIFEST = REPO / "traces" / "manifest.yaml"


def test_manifest_rejects_absolute_and_unknown(tmp_path: Path) -> None:
    bad = tmp_path / "m.yaml"
    bad.write_text("version: 1\nfiles:\n  - file: /abs/x.txt\n    importer: osu\n"
                   "    out: comm/x.csv\n")
    with pytest.raises(InputError, match="relative") as err:
        load_manifest(bad)
    assert err.value.field == "files[0].file"
    bad.write_text("version: 1\nfiles:\n  - file: x.txt\n    importer: osu\n"
                   "    out: comm/x.csv\n    args: {bogus: 1}\n")
    with pytest.raises(InputError, match="unknown option 'bogus'"):
        load_manifest(bad)


_NOT_DATA = {"README.md", "LICENSE", "LICENSE.txt", "LICENSE-NOTE"}


def _is_data(path: Path) -> bool:
    """A shipped data file: not a README or a licence (``LICENSE.<source>`` where a folder
    holds files from several sources)."""
    return path.is_file() and path.name not in _NOT_DATA and not path.name.startswith("LICENSE.")


def test_manifest_files_are_shipped(external_dir: Path) -> None:
    listed = {e.file for e in load_manifest(MANIFEST)}
    shipped = {str(p.relative_to(external_dir)) for p in external_dir.rglob("*") if _is_data(p)}
    assert listed <= shipped, sorted(listed - shipped)


def test_external_readme_lists_every_shipped_file() -> None:
    """data/external/README.md has one table row per shipped data file, and no other."""
    root = REPO / "data" / "external"
    rows = re.findall(r"^\| `([^`]+)` \|", (root / "README.md").read_text(), flags=re.M)
    shipped = {str(p.relative_to(root)) for p in root.rglob("*") if _is_data(p)}
    assert len(rows) == len(set(rows))
    assert set(rows) == shipped
    for folder in {Path(f).parts[0] for f in shipped}:
        assert any((root / folder / name).is_file() for name in _NOT_DATA - {"README.md"}), folder


def test_manifest_reimport_is_byte_identical(external_dir: Path, tmp_path: Path) -> None:
    written = []
    for _entry, _result, paths in run_manifest(MANIFEST, external_dir, tmp_path):
        written.extend(paths)
    assert len(written) == sum(1 + bool(e.comm_out) for e in load_manifest(MANIFEST))
    for path in written:
        rel = path.relative_to(tmp_path)
        committed = REPO / "traces" / rel
        assert filecmp.cmp(path, committed, shallow=False), rel
        sidecar = rel.with_name(rel.stem + ".meta.json")
        assert filecmp.cmp(tmp_path / sidecar, REPO / "traces" / sidecar, shallow=False), sidecar


def test_captured_traces_are_listed_and_valid() -> None:
    """Every trace we measured ourselves (traces/compute/h200) is listed under `captured`
    with its provenance, exists, and validates."""
    entries = load_captured(MANIFEST, REPO / "traces")
    h200 = [e for e in entries if e["trace"].startswith("compute/h200/")]
    assert len(h200) == 18
    for entry in h200:
        assert "77ec4d7" in entry["code"] and "H200" in entry["machine"]
        assert (REPO / entry["raw"]).is_file()
        trace = ComputeTrace.load(REPO / "traces" / entry["trace"])
        assert "NVIDIA H200" in trace.meta["device"]
