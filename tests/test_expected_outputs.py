"""tools/verify_outputs.py: the expected-output manifest and its check (reproduced / differs /
missing), on a temporary folder standing in for the repository."""

import gzip
import importlib.util
import shutil
import sys

import pytest

from gradsched.errors import InputError
from tests.conftest import REPO


def _load():
    spec = importlib.util.spec_from_file_location(
        "verify_outputs", REPO / "tools" / "verify_outputs.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("verify_outputs", module)
    spec.loader.exec_module(module)
    return module


vo = _load()


def _outputs(root):
    (root / "paper" / "tables").mkdir(parents=True)
    (root / "paper" / "generated").mkdir(parents=True)
    (root / "results" / "fit").mkdir(parents=True)
    (root / "paper" / "tables" / "fits.tex").write_text("a & b \\\\\n")
    (root / "paper" / "generated" / "macros.tex").write_text("\\newcommand{\\x}{1}\n")
    (root / "results" / "fit" / "fits.csv").write_text("alpha_s,beta_s_per_byte\n1,2\n")
    (root / "results" / "fit" / "notes.txt").write_text("not an output the manifest lists\n")


def test_update_lists_the_selected_outputs_and_a_fresh_run_reproduces(tmp_path):
    _outputs(tmp_path)
    manifest = tmp_path / vo.MANIFEST
    assert vo.main(["--root", str(tmp_path), "--update"]) == 0
    expected = vo.read_manifest(manifest)
    assert sorted(expected) == [
        "paper/generated/macros.tex", "paper/tables/fits.tex", "results/fit/fits.csv"
    ]
    checks = vo.verify(tmp_path, expected)
    assert {c.status for c in checks} == {"reproduced"}
    assert vo.main(["--root", str(tmp_path), "--strict"]) == 0


def test_a_changed_byte_differs_and_a_deleted_file_is_missing(tmp_path, capsys):
    _outputs(tmp_path)
    vo.main(["--root", str(tmp_path), "--update"])
    (tmp_path / "paper" / "tables" / "fits.tex").write_text("a & c \\\\\n")
    (tmp_path / "results" / "fit" / "fits.csv").unlink()
    capsys.readouterr()
    assert vo.main(["--root", str(tmp_path)]) == 0  # reports, does not fail the build
    out = capsys.readouterr().out
    assert "differs     paper/tables/fits.tex" in out
    assert "missing     results/fit/fits.csv" in out
    assert out.rstrip().endswith("1 reproduced, 1 differ, 1 missing (of 3)")
    assert vo.main(["--root", str(tmp_path), "--strict"]) == 1


def test_a_malformed_manifest_line_names_file_and_line(tmp_path, capsys):
    manifest = tmp_path / "expected.sha256"
    manifest.write_text("# comment\n" + "0" * 64 + "  a.csv\nnot a digest  b.csv\n")
    with pytest.raises(InputError, match=r"expected\.sha256, line 3"):
        vo.read_manifest(manifest)
    assert vo.main(["--root", str(tmp_path), "--manifest", str(manifest)]) == 2
    assert "line 3" in capsys.readouterr().err


def test_a_path_listed_twice_is_an_error(tmp_path):
    manifest = tmp_path / "expected.sha256"
    manifest.write_text(("0" * 64 + "  a.csv\n") * 2)
    with pytest.raises(InputError, match="listed twice"):
        vo.read_manifest(manifest)


def test_the_committed_manifest_parses_and_lists_tables_macros_and_claims():
    expected = vo.read_manifest(REPO / vo.MANIFEST)
    assert "paper/generated/macros.tex" in expected
    assert "paper/generated/claims.md" in expected
    assert any(p.startswith("paper/tables/") for p in expected)
    assert any(p.startswith("results/") and p.endswith(".csv") for p in expected)


def test_update_keeps_gzipped_copies_of_the_csvs_deterministically(tmp_path):
    _outputs(tmp_path)
    assert vo.main(["--root", str(tmp_path), "--update"]) == 0
    copy = tmp_path / vo.EXPECTED / "results" / "fit" / "fits.csv.gz"
    assert sorted(p.relative_to(tmp_path / vo.EXPECTED).as_posix()
                  for p in (tmp_path / vo.EXPECTED).rglob("*.gz")) == [
        "paper/generated/macros.tex.gz", "paper/tables/fits.tex.gz", "results/fit/fits.csv.gz"]
    first = copy.read_bytes()
    assert gzip.decompress(first) == (tmp_path / "results" / "fit" / "fits.csv").read_bytes()
    assert vo.main(["--root", str(tmp_path), "--update"]) == 0
    assert copy.read_bytes() == first  # no name, no date: the same bytes every time
    for path in ("results/fit/fits.csv", "paper/tables/fits.tex"):
        (tmp_path / path).unlink()
    assert vo.main(["--root", str(tmp_path), "--update"]) == 0  # stale copies removed
    assert sorted(p.relative_to(tmp_path / vo.EXPECTED).as_posix()
                  for p in (tmp_path / vo.EXPECTED).rglob("*")) == [
        "paper", "paper/generated", "paper/generated/macros.tex.gz"]


def test_a_differing_csv_names_its_columns_and_largest_relative_difference(tmp_path, capsys):
    results = tmp_path / "results" / "replay"
    results.mkdir(parents=True)
    csv = results / "replay.csv"
    csv.write_text("algorithm,iteration_s,knobs\nwfbp,0.30994,{}\nsearch,0.25,{}\n")
    assert vo.main(["--root", str(tmp_path), "--update"]) == 0
    # float noise in one cell, a changed winner label in another, a new column
    csv.write_text("algorithm,iteration_s,knobs,extra\nwfbp,0.30994000000000004,{},1\n"
                   "search,0.25,{\"a\": 1},2\n")
    capsys.readouterr()
    assert vo.main(["--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "differs     results/replay/replay.csv" in out
    assert "columns added: extra" in out
    assert "iteration_s: 1 of 2 cells differ, max relative difference 1.79e-16" in out
    assert "knobs: 1 of 2 cells differ (e.g. '{}' -> '{\"a\": 1}')" in out
    assert "algorithm" not in out.split("replay.csv", 1)[1]  # equal columns are not named


def test_differences_without_an_expected_copy_say_how_to_get_one(tmp_path, capsys):
    _outputs(tmp_path)
    vo.main(["--root", str(tmp_path), "--update"])
    shutil.rmtree(tmp_path / vo.EXPECTED)
    (tmp_path / "results" / "fit" / "fits.csv").write_text("alpha_s,beta_s_per_byte\n1,3\n")
    capsys.readouterr()
    vo.main(["--root", str(tmp_path)])
    assert "no expected copy" in capsys.readouterr().out


def test_csv_differences_rows_and_relative_difference():
    want = [["a", "b"], ["1", "x"], ["2", "y"]]
    assert vo.csv_differences(want, [["a", "b"], ["1", "x"]]) == [
        "rows: 1 instead of 2 (the first 1 compared)"]
    assert vo.csv_differences(want, [["b", "a"], ["x", "1"], ["y", "2"]]) == [
        "the cells are equal (the bytes differ: quoting, line ends or order)"]
    assert vo.relative_difference("2", "1") == 0.5
    assert vo.relative_difference("0", "0.0") == 0.0
    assert vo.relative_difference("nan", "1") == float("inf")
    assert vo.relative_difference("n/a", "1") is None


def test_a_difference_says_how_to_see_it_and_never_to_overwrite_the_expected(tmp_path, capsys):
    """The advice on a difference names --diff; `make update-expected` (which overwrites
    the expected outputs with the reviewer's) only as what not to run."""
    _outputs(tmp_path)
    vo.main(["--root", str(tmp_path), "--update"])
    (tmp_path / "paper" / "tables" / "fits.tex").write_text("a & c \\\\\n")
    capsys.readouterr()
    vo.main(["--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert "python tools/verify_outputs.py --diff PATH" in out
    text = " ".join(out.split())
    assert text.count("make update-expected") == text.count("do not run `make update-expected`")
    # a table's changed lines are shown under its path (tables are kept as copies too)
    assert "-a & b \\\\" in out and "+a & c \\\\" in out
    assert vo.main(["--root", str(tmp_path), "--diff", "paper/tables/fits.tex"]) == 0
    diff = capsys.readouterr().out
    assert diff.startswith("--- expected/paper/tables/fits.tex\n+++ paper/tables/fits.tex\n")
    assert vo.main(["--root", str(tmp_path), "--diff", "paper/figures/x.pdf"]) == 2


def test_the_expected_copies_can_be_committed():
    """.gitignore ignores the outputs (results/) but not their committed copies under
    paper/expected/ (an unanchored ``results/`` matched paper/expected/results/ too)."""
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    import subprocess

    def ignored(path: str) -> bool:
        return subprocess.run([git, "check-ignore", "-q", "--no-index", path], cwd=REPO,
                              check=False).returncode == 0

    assert ignored("results/fit/fits.csv")
    assert not ignored("paper/expected/results/fit/fits.csv.gz")
    assert not ignored("paper/expected/paper/tables/fits.tex.gz")


def test_the_committed_copies_are_the_manifests_text_outputs():
    """paper/expected/ holds a gzip'd copy of every text output the manifest lists, with the
    manifest's bytes (``--update`` writes both; a manifest updated alone fails here)."""
    import hashlib

    expected = vo.read_manifest(REPO / vo.MANIFEST)
    copies = REPO / vo.EXPECTED
    text = sorted(p for p in expected if p.endswith(vo.TEXT_SUFFIXES))
    kept = sorted(p.relative_to(copies).as_posix()[:-len(".gz")] for p in copies.rglob("*.gz"))
    assert kept == text
    for path in text:
        data = gzip.decompress((copies / (path + ".gz")).read_bytes())
        assert hashlib.sha256(data).hexdigest() == expected[path], path
