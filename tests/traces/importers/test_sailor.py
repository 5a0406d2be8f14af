"""The importer of Sailor's public per-layer GPU profiles (profile.json).

Tests on the shipped files (data/external) check the importer against numbers recomputed
here from the raw text; the small profiles written in tests are SYNTHETIC and say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.traces import ComputeTrace
from gradsched.traces.importers import sailor
from gradsched.traces.importers.manifest import load_manifest
from tests.traces.importers.test_pipedream import MANIFEST

# ---------------------------------------------------------------- Sailor: shipped files
SAILOR = "sailor/profiles"


def _profile(external_dir: Path, model: str, gpu: str) -> Path:
    return external_dir / SAILOR / model / gpu / "profile.json"


def test_sailor_parameter_formula_matches_public_totals() -> None:
    """Public parameter counts: OPT-350M 331,196,416; GPT-Neo-2.7B 2,651,307,520."""
    for key, total in (("OPT-350", 331_196_416), ("GPT-Neo-2.7", 2_651_307_520)):
        config = sailor.MODELS[key]
        counted = (sailor.layer_params(config, "embedding")
                   + config.layers * sailor.layer_params(config, "transformer")
                   + sailor.layer_params(config, "head"))
        assert counted == total, key
    # Sailor's own llm_info.json gives 12,596,224 per OPT-350 transformer layer.
    assert sailor.layer_params(sailor.MODELS["OPT-350"], "transformer") == 12_596_224
    # Tensor parallelism splits the matrices, not the LayerNorms or row-parallel biases.
    opt = sailor.MODELS["OPT-350"]
    h, f = 1024, 4096
    split = 4 * h * h + 2 * h * f + 3 * h + f  # q,k,v,out and MLP matrices, q,k,v and fc1 biases
    replicated = 6 * h  # out-projection and fc2 biases, two LayerNorms
    assert sailor.layer_params(opt, "transformer", 2) == split // 2 + replicated
    assert sailor.layer_params(opt, "transformer", 1) == split + replicated


@pytest.mark.parametrize(("model", "gpu"), [
    ("OPT-350", "A100-40"), ("OPT-350", "A100-80"), ("OPT-350", "GH-96"),
    ("OPT-350", "V100-16"), ("OPT-350", "RTX-3090"), ("GPT-Neo-2.7", "A100-40"),
    ("GPT-Neo-2.7", "A100-80"), ("GPT-Neo-2.7", "V100-16"),
])
def test_sailor_profiles(external_dir: Path, model: str, gpu: str) -> None:
    path = _profile(external_dir, model, gpu)
    result = sailor.import_sailor(path)
    trace = result.compute
    assert trace is not None
    config = sailor.MODELS[model]
    assert trace.n_tensors == config.layers + 2
    assert trace.names[0] == "layer00.embedding" and trace.names[-1].endswith(".head")
    raw = json.loads(path.read_text())["1"]["1"]
    assert trace.forward_total_s == pytest.approx(sum(v[0] for v in raw.values()), rel=1e-12)
    assert trace.backward_total_s == pytest.approx(sum(v[1] for v in raw.values()), rel=1e-12)
    assert list(trace.frame["backward_s"]) == [raw[str(k)][1] for k in range(len(raw))]
    assert trace.meta["batch_size"] == 1 and trace.meta["sequence_length"] == 2048
    assert trace.meta["tensor_parallel"] == 1 and gpu in trace.meta["device"]
    assert (trace.frame["update_s"] == 0).all()


def test_sailor_gh96_duplicate_is_flagged(external_dir: Path) -> None:
    opt = sailor.import_sailor(_profile(external_dir, "OPT-350", "GH-96"))
    assert opt.compute is not None
    assert opt.compute.meta["duplicate_of"] == ["GPT-Neo-2.7/GH-96/profile.json"]
    assert any("likely a copy" in w.message for w in opt.warnings)
    with pytest.raises(InputError, match="same numbers as OPT-350/GH-96") as err:
        sailor.import_sailor(_profile(external_dir, "GPT-Neo-2.7", "GH-96"))
    assert err.value.field == "1.1"
    entries = [e for e in load_manifest(MANIFEST) if e.importer == "sailor"]
    assert "sailor/profiles/GPT-Neo-2.7/GH-96/profile.json" not in {e.file for e in entries}
    assert len(entries) == 10


def test_sailor_options_pick_the_entry(external_dir: Path) -> None:
    path = _profile(external_dir, "OPT-350", "A100-40")
    four = sailor.import_sailor(path, sailor.Options(micro_batch=4, tensor_parallel=2))
    assert four.compute is not None and four.compute.meta["batch_size"] == 4
    one = sailor.import_sailor(path).compute
    assert one is not None
    assert four.compute.total_bytes < one.total_bytes
    with pytest.raises(InputError, match="no micro-batch 3"):
        sailor.import_sailor(path, sailor.Options(micro_batch=3))


# ---------------------------------------------------------------- Sailor: synthetic files
def _opt_profile(tmp_path: Path, layers: dict[str, object], name: str = "p") -> Path:
    """A SYNTHETIC profile in an OPT-350/<name>/ folder (no siblings: no duplicates)."""
    path = tmp_path / name / "OPT-350" / "X" / "profile.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"1": {"1": layers}}))
    return path


def _layers(n: int = 26) -> dict[str, object]:
    return {str(k): [0.001, 0.002, 0.003] for k in range(n)}


def test_sailor_bad_input(tmp_path: Path) -> None:
    truncated = _opt_profile(tmp_path, _layers(), "trunc")
    truncated.write_text(truncated.read_text()[:-40])
    with pytest.raises(InputError, match="not valid JSON") as err:
        sailor.import_sailor(truncated)
    assert err.value.path == str(truncated) and err.value.line == 1
    missing = _layers()
    missing["7"] = [0.001, 0.002]
    with pytest.raises(InputError, match=r"\[forward_s, backward_s, update_s\]") as err:
        sailor.import_sailor(_opt_profile(tmp_path, missing, "missing"))
    assert err.value.field == "1.1.7"
    with pytest.raises(InputError, match="25 layers"):
        sailor.import_sailor(_opt_profile(tmp_path, _layers(25), "short"))
    no_bwd = {k: [0.001, 0.0, 0.0] for k in _layers()}
    with pytest.raises(InputError, match="no backward"):
        sailor.import_sailor(_opt_profile(tmp_path, no_bwd, "nobwd"))
    negative = _layers()
    negative["3"] = [0.001, -1.0, 0.0]
    with pytest.raises(InputError, match=r"backward_s -1\.0"):
        sailor.import_sailor(_opt_profile(tmp_path, negative, "neg"))


def test_sailor_cli_error_writes_nothing(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o" / "t.csv"
    bad = _opt_profile(tmp_path, _layers(24), "bad")
    assert main(["import", "sailor", str(bad), "-o", str(out)]) == 2
    assert "24 layers" in capsys.readouterr().err
    assert not out.exists() and not out.with_name("t.meta.json").exists()
    good = _opt_profile(tmp_path, _layers(), "good")
    assert main(["import", "sailor", str(good), "-o", str(out)]) == 0
    assert ComputeTrace.load(out).n_tensors == 26
