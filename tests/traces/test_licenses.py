"""Every external trace names its source by a URL a reader can follow and a licence that was
verified (data/external/README.md, one row per shipped file: source, licence), and its
sidecar's `source` and its raw log's `# source:` header cite no search-index id. A licence
note (`LICENSE-NOTE`) names the same commit as the file's header. A file whose licence could
not be verified fails here instead of slipping in (those found were removed)."""

from __future__ import annotations

import fnmatch
import json
import re

from gradsched.traces.importers.manifest import load_manifest
from tests.conftest import REPO

MANIFEST = REPO / "traces" / "manifest.yaml"
EXTERNAL = REPO / "data" / "external"
README = EXTERNAL / "README.md"
# What a search index's id looks like in a provenance line ("find_string id 54728210092",
# "file id ..."): nothing a reader can follow.
INDEX_ID = re.compile(r"search-index|find_string|file id|\bid \d{6,}", re.IGNORECASE)
COMMIT = re.compile(r"\b[0-9a-f]{40}\b")
UNVERIFIED_WORDS = re.compile(r"not stated|none stated|not verified|unknown", re.IGNORECASE)
# None: files whose licence could not be verified were removed (data/external/README.md,
# "Removed"); a new one must not be shipped.
UNVERIFIED: set[str] = set()
NO_URL: set[str] = set()


def _readme_rows() -> dict[str, tuple[str, str]]:
    """{shipped file: (source cell, licence cell)} of data/external/README.md's file table."""
    rows = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def _external_files() -> list[str]:
    return sorted({entry.file for entry in load_manifest(MANIFEST)})


def test_every_external_trace_has_a_readme_row():
    rows = _readme_rows()
    assert [f for f in _external_files() if f not in rows] == []


def test_sources_are_urls_except_the_pinned_few():
    rows = _readme_rows()
    no_url = {f for f in _external_files() if "https://" not in rows[f][0]}
    assert no_url == NO_URL


def test_licences_are_verified_except_the_pinned_few():
    rows = _readme_rows()
    unverified = {f for f in _external_files() if UNVERIFIED_WORDS.search(rows[f][1])}
    assert unverified == UNVERIFIED
    assert all(rows[f][1] for f in _external_files())


def test_sidecars_name_a_source_and_no_search_index_id():
    for entry in load_manifest(MANIFEST):
        for out in filter(None, (entry.out, entry.comm_out)):
            sidecar = REPO / "traces" / out.replace(".csv", ".meta.json")
            source = json.loads(sidecar.read_text(encoding="utf-8"))["source"]
            assert source.strip(), sidecar
            assert not INDEX_ID.search(source), sidecar


def test_raw_logs_cite_no_search_index_id():
    for entry in load_manifest(MANIFEST):
        head = (EXTERNAL / entry.file).read_bytes()[:4096].decode("utf-8", "replace")
        source = [line for line in head.splitlines() if line.startswith("# source:")]
        assert not any(INDEX_ID.search(line) for line in source), entry.file


def _licence_notes() -> list[tuple[str, str]]:
    """(file pattern relative to data/external, note line) of every LICENSE-NOTE's
    ``- name: ...`` lines."""
    out = []
    for note in sorted(EXTERNAL.glob("*/LICENSE-NOTE")):
        for line in note.read_text(encoding="utf-8").splitlines():
            if line.startswith("- ") and ":" in line:
                out.append((f"{note.parent.name}/{line[2:].split(':', 1)[0].strip()}", line))
    return out


def test_licence_notes_name_the_commit_of_the_file_header():
    files = _external_files()
    checked = 0
    for pattern, line in _licence_notes():
        noted = set(COMMIT.findall(line))
        for name in fnmatch.filter(files, pattern):
            header = (EXTERNAL / name).read_text(encoding="utf-8").splitlines()[0]
            cited = set(COMMIT.findall(header))
            if noted and cited:
                assert noted == cited, (name, sorted(noted), sorted(cited))
                checked += 1
    assert checked >= 1


def test_readme_cites_test_files_that_exist():
    cited = re.findall(r"`(tests/[\w/]+\.py)`", README.read_text(encoding="utf-8"))
    assert cited
    assert [path for path in cited if not (REPO / path).is_file()] == []


def test_every_source_repository_is_credited_in_the_archive_metadata():
    """Each repository or page a shipped file was read from (data/external/README.md's file
    table) is an ``isDerivedFrom`` identifier of .zenodo.json, so the archive credits it."""
    derived = {item["identifier"].rstrip("/") for item in
               json.loads((REPO / ".zenodo.json").read_text(encoding="utf-8"))
               ["related_identifiers"] if item["relation"] == "isDerivedFrom"}
    sources = set()
    for source, _ in _readme_rows().values():
        for url in re.findall(r"https://[^\s,;)`]+", source):
            match = re.match(r"(https://github\.com/[^/]+/[^/]+)", url)
            if match and "/issues/" not in url:
                sources.add(match.group(1))
            elif not match:
                sources.add(url.rstrip("/."))
    assert sorted(sources - derived) == []
