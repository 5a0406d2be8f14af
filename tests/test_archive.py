"""The archive metadata (LICENSE, CITATION.cff, .zenodo.json) exists, parses and agrees with
pyproject.toml on licence and version (CFF 1.2.0: https://citation-file-format.github.io/)."""

import json
import tomllib

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
