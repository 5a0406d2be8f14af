"""The archive metadata (LICENSE, CITATION.cff, .zenodo.json) exists, parses and agrees with
pyproject.toml on licence and version (CFF 1.2.0: https://citation-file-format.github.io/)."""

import json
import tomllib

import pytest
import yaml

from tests.conftest import REPO

CFF_REQUIRED = ("cff-version", "message", "title", "authors")


def _pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _cff():
    return yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))


def _zenodo():
    return json.loads((REPO / ".zenodo.json").read_text(encoding="utf-8"))


def test_license_file_is_mit_as_pyproject_says():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert _pyproject()["license"]["text"] == "MIT"
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 the gradsched authors" in text


def test_citation_cff_has_the_required_keys_and_matches_pyproject():
    cff = _cff()
    missing = [key for key in CFF_REQUIRED if key not in cff]
    assert not missing, f"CITATION.cff lacks {missing}"
    assert cff["cff-version"] == "1.2.0"
    assert cff["license"] == _pyproject()["license"]["text"]
    assert cff["version"] == _pyproject()["version"]
    assert all("name" in a or "family-names" in a for a in cff["authors"])


def test_citation_cff_references_name_the_implemented_papers():
    titles = " ".join(ref["title"] for ref in _cff()["references"])
    for name in ("MG-WFBP", "DeAR", "OASR-WFBP"):
        assert name in titles


def test_zenodo_metadata_matches_pyproject():
    zenodo = _zenodo()
    for key in ("title", "description", "license", "creators", "keywords", "version"):
        assert zenodo.get(key), f".zenodo.json lacks {key}"
    assert zenodo["license"] == _pyproject()["license"]["text"]
    assert zenodo["version"] == _pyproject()["version"]
    for item in zenodo["related_identifiers"]:
        assert {"identifier", "relation", "scheme"} <= item.keys(), item


def test_the_code_url_is_the_same_in_both_citation_files():
    """Where CITATION.cff names the repository (``repository-code``, ``url``), .zenodo.json
    names the same URL as the code the archive supplements, and both are https URLs."""
    cff, zenodo = _cff(), _zenodo()
    urls = {cff[key] for key in ("repository-code", "url") if key in cff}
    supplements = {item["identifier"] for item in zenodo["related_identifiers"]
                   if item["relation"] == "isSupplementTo"}
    assert urls == supplements
    assert all(url.startswith("https://") for url in urls | supplements)


# ------------------------------------------------------------- results column dictionary
COLUMNS_DOC = REPO / "docs" / "results-columns.md"


def _documented_columns():
    """Column names of docs/results-columns.md: first cells of its tables, and the
    backquoted names of its 'Also:' lines."""
    names = set()
    for line in COLUMNS_DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            names.add(line.split("`")[1])
        elif line.startswith("Also"):
            names.update(line.split("`")[1::2])
    return names


def _header(path):
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                return line.strip().split(",")
    return []


def _undocumented(paths):
    documented = _documented_columns()
    return {
        str(p.relative_to(REPO)): missing
        for p in paths
        if (missing := [c for c in _header(p) if c not in documented])
    }


def test_every_committed_paper_data_column_is_in_the_dictionary():
    paths = sorted((REPO / "paper" / "data").rglob("*.csv"))
    assert paths
    assert _undocumented(paths) == {}


def test_every_results_column_is_in_the_dictionary():
    paths = sorted((REPO / "results").rglob("*.csv"))
    if not paths:
        pytest.skip("no results/ here: run make reproduce (or copy a run's results/)")
    assert _undocumented(paths) == {}
