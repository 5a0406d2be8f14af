"""Inputs refused with one clear line (family "inputs": tracebacks, silent accepts, unclear
errors found by trying every verb as a hostile user).

Table-driven: each row is one ``gradsched`` command line with one bad input, run in-process
through :func:`gradsched.cli.main`. It must exit with status 2, print no traceback, and end
its stderr with one ``error:`` line that holds the expected piece (which names the file and
the field or line where one applies). Before these fixes each row either raised a traceback
(or "internal error", exit 1), was accepted silently (exit 0), or was refused with a message
that did not say what was wrong. All inputs are SYNTHETIC (made by the fixture below).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import ConfigError, InputError
from gradsched.io import parse_yaml
from gradsched.plan import BUCKET_ALGORITHMS
from gradsched.traces import CommTrace
from tests.conftest import REPO, synthetic_compute_trace


def _comm(sizes: list[int], times: list[float] | None = None, world: int = 4) -> CommTrace:
    """A SYNTHETIC all-reduce comm trace (alpha-beta times unless given)."""
    nbytes = np.asarray(sizes, dtype=np.int64)
    frame = pd.DataFrame({
        "collective": "all_reduce", "backend": "gloo", "algorithm": "default",
        "world_size": world, "nodes": world, "in_place": True, "bytes": nbytes,
        "time_s": 1e-4 + nbytes * 1e-9 if times is None else times})
    meta = {"kind": "comm", "source": "SYNTHETIC test fixture, not measured",
            "hardware": "none", "statistic": "median"}
    return CommTrace.from_frame(frame, meta)


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of SYNTHETIC inputs, good and bad."""
    d = tmp_path_factory.mktemp("inputs")
    synthetic_compute_trace(8).save(d / "c.csv")
    sizes = [2**k for k in range(2, 24, 2)]
    _comm(sizes).save(d / "m.csv")
    good = (d / "c.csv").read_text(encoding="utf-8").splitlines()
    meta = json.loads((d / "c.meta.json").read_text(encoding="utf-8"))

    def compute_variant(name: str, field: str, value: str) -> None:
        header = good[0].split(",")
        cells = good[1].split(",")
        cells[header.index(field)] = value
        _write(d / f"{name}.csv", "\n".join([good[0], ",".join(cells), *good[2:]]) + "\n")
        _write(d / f"{name}.meta.json", json.dumps(meta))

    compute_variant("underscore", "numel", "55_296")
    compute_variant("fullwidth", "numel", "\uff15\uff15\uff12\uff19\uff16")
    compute_variant("underscore_float", "forward_s", "1_0e-3")
    for name, field, value in [("sidecar_ranks", "world_size", 2**80),
                               ("sidecar_batch", "batch_size", 1e300),
                               ("sidecar_iteration", "iteration_s", 1e300)]:
        _write(d / f"{name}.csv", "\n".join(good) + "\n")
        _write(d / f"{name}.meta.json", json.dumps({**meta, field: value}))
    _write(d / "extra_cell.csv", "\n".join([good[0], good[1] + ",5", *good[2:]]) + "\n")
    _write(d / "extra_cell.meta.json", json.dumps(meta))
    # a comm series whose time falls over its whole range (columns swapped, say)
    falling = list(np.linspace(1.0, 0.1, len(sizes)))
    _write(d / "falling.csv", (d / "m.csv").read_text(encoding="utf-8"))
    frame = pd.read_csv(d / "m.csv")
    frame = frame.drop(columns=[c for c in ("time_min_s", "time_max_s") if c in frame])
    frame["time_s"] = falling
    frame.to_csv(d / "falling.csv", index=False)
    _write(d / "falling.meta.json", (d / "m.meta.json").read_text(encoding="utf-8"))

    names = [f"layer{i}.weight" for i in range(8)]
    base = {"format": "gradsched.plan", "format_version": 2, "algorithm": "synthetic",
            "buckets": [{"tensors": names}]}
    plans = {
        "alg_unknown": {"buckets": [{"tensors": names, "algorithm": "nope"}]},
        "alg_number": {"buckets": [{"tensors": names, "algorithm": 5}]},
        "alg_rsag": {"buckets": [{"tensors": names, "algorithm": "ring",
                                  "collective": "rs_ag"}]},
        "top_alg_list": {"algorithm": ["wfbp"]},
        "bucket_typo": {"buckets": [{"tensors": names, "chunk": 4}]},
    }
    for name, change in plans.items():
        _write(d / f"plan_{name}.json", json.dumps({**base, **change}))
    typo = {k: v for k, v in base.items() if k != "buckets"} | {"bukets": base["buckets"]}
    _write(d / "plan_typo.json", json.dumps(typo))

    reexec = {
        "iters_text": 'reexec:\n  settings:\n    iters: "7"\n',
        "timeout_underscore": "reexec:\n  settings:\n    timeout_s: 1_0\n",
        "batch_word": "reexec:\n  cases:\n    - {model: resnet18, batch_size: four, "
                      "world_size: 2, network: loopback, compute: c.csv}\n",
        "world_octal": "reexec:\n  cases:\n    - {model: resnet18, batch_size: 4, "
                       "world_size: 012, network: loopback, compute: c.csv}\n",
        "cases_number": "reexec:\n  cases: 5\n",
        "case_number": "reexec:\n  cases:\n    - 5\n",
        "algorithms_text": "reexec:\n  settings:\n    algorithms: wfbp\n"
                           "  cases:\n    - {model: m, batch_size: 1, world_size: 2, "
                           "network: loopback, compute: c.csv}\n",
        "allow_load_on": "reexec:\n  settings:\n    allow_load: on\n"
                         "  cases:\n    - {model: m, batch_size: 1, world_size: 2, "
                         "network: loopback, compute: c.csv}\n",
        "empty": "",
    }
    for name, text in reexec.items():
        _write(d / f"reexec_{name}.yaml", text)
    topo = (REPO / "config" / "topologies" / "abci-a100-2x8-flat.yaml").read_text(
        encoding="utf-8")
    intra = REPO / "traces" / "comm" / "external" / "nccl-abci-intra-anode-8.csv"
    topo = topo.replace("../../traces/comm/external/nccl-abci-intra-anode-8.csv", str(intra))
    _write(d / "topo_underscore.yaml", topo.replace("nodes: 2", "nodes: 0_2"))
    _write(d / "topo_octal.yaml", topo.replace("ranks_per_node: 8", "ranks_per_node: 010"))
    series = {"collective": "all_reduce", "world_size": 4, "alpha_s": 1e-4,
              "beta_s_per_byte": 1e-9}
    _write(d / "ab_twice.json", json.dumps({"kind": "alpha-beta-series", "series": [
        series, {**series, "alpha_s": 1.0}]}))
    _write(d / "ab_no_beta.json", json.dumps({"kind": "alpha-beta-series", "series": [
        {k: v for k, v in series.items() if k != "beta_s_per_byte"}]}))
    _write(d / "analytic_no_beta.json", json.dumps({"kind": "analytic", "alpha_s": 1e-5}))
    _write(d / "interp_series_object.json", json.dumps({"kind": "interp", "series": {"a": 1}}))
    _write(d / "bcaffe_underscore.log", "".join(
        f"I0101 00:00:00.000000  1 distributed.cpp:112] [{i}, {size}, 10.0, 5.0]\n"
        for i, size in enumerate(["1_00", "10"])))
    row = {"trace": "synth", "network": "net", "comm_file": "m", "nodes": 4, "family": "",
           "pairing": "what-if", "extrapolated": False, "algorithm": "wfbp", "world_size": 4,
           "iteration_s": 0.015, "compute_s": 0.014, "exposed_comm_s": 0.001,
           "n_collectives": 8, "n_buckets": 8, "comm_busy_s": 0.002, "lower_bound_s": 0.014,
           "gap_to_lb_pct": 0.4, "knobs": "{}"}
    pd.DataFrame([{**row, "iteration_s": "abc"}]).to_csv(d / "collected_text.csv", index=False)
    pd.DataFrame([{**row, "iteration_s": ""}]).to_csv(d / "collected_empty.csv", index=False)
    _write(d / "sailor_by_model.json", json.dumps({"OPT-350": {"1": {}}}))
    measured = (REPO / "paper" / "data" / "reexec" / "measured.csv").read_text(
        encoding="utf-8").splitlines()  # committed, real; only one cell is changed below
    header = measured[0].split(",")

    def measured_variant(name: str, field: str, value: str) -> None:
        cells = measured[1].split(",")
        cells[header.index(field)] = value
        _write(d / f"{name}.csv",
               "\n".join([measured[0], ",".join(cells), *measured[2:]]) + "\n")

    measured_variant("measured_text", "measured_s", "abc")
    measured_variant("measured_empty", "measured_s", "")
    measured_variant("measured_underscore", "world_size", "1_6")
    for name, arg in [("manifest_text_ranks", "world_size: two"),
                      ("manifest_underscore", "error_tolerance: 1_0")]:
        _write(d / f"{name}.yaml", "version: 1\nfiles:\n  - file: nccl.txt\n"
               "    importer: nccl-tests\n    out: comm/x.csv\n"
               f"    args: {{source: SYNTHETIC, hardware: none, {arg}}}\n")
    _write(d / "interference.json", json.dumps({"compute_slowdown": 1.5, "comm_slowdown": 1.2,
                                                "collective_cpu_s": 1e-4}))
    (d / "folder").mkdir()
    return d


@dataclass(frozen=True)
class Case:
    """One bad input: its defect class (traceback, silent, unclear), the command line
    ({d}: the fixture folder) and a piece of the one-line error."""

    kind: str
    argv: str
    message: str


REPLAY = "replay --compute {d}/c.csv --comm {d}/m.csv -o {d}/out.csv"
PLAN = "plan --compute {d}/c.csv --comm {d}/m.csv -o {d}/p.json"
RUN = "run --model tiny-mlp --batch-size 2 --world-size 2 -o {d}/r.csv --plan"
REEXEC = "reexec run --list --config"

CASES: list[Case] = [
    # --- tracebacks (or "internal error", exit 1) before ---
    Case("traceback", f"{RUN} {{d}}/plan_alg_unknown.json",
         "plan_alg_unknown.json, field 'buckets[0].algorithm': unknown bucket algorithm"),
    Case("traceback", f"{RUN} {{d}}/plan_alg_rsag.json",
         "field 'buckets[0].algorithm': algorithm 'ring' needs an all_reduce bucket"),
    Case("traceback", f"{REEXEC} {{d}}/reexec_iters_text.yaml",
         "reexec_iters_text.yaml, field 'reexec.settings.iters': '7' is not of type 'integer'"),
    Case("traceback", f"{REEXEC} {{d}}/reexec_batch_word.yaml",
         "field 'reexec.cases[0].batch_size': 'four' is not of type 'integer'"),
    Case("traceback", f"{REEXEC} {{d}}/reexec_cases_number.yaml",
         "reexec_cases_number.yaml, field 'reexec.cases': 5 is not of type 'array'"),
    Case("traceback", f"{REEXEC} {{d}}/reexec_case_number.yaml",
         "field 'reexec.cases[0]': 5 is not of type 'object'"),
    Case("traceback", f"{REEXEC} {{d}}/reexec_algorithms_text.yaml",
         "field 'reexec.settings.algorithms': 'wfbp' is not of type 'array'"),
    Case("traceback", "report table replay --input {d}/collected_text.csv --tex {d}/t.tex "
         "--md {d}/t.md", "collected_text.csv, row 1, field 'iteration_s': 'abc' is not a number"),
    Case("traceback", "report figure replay-vs-world-size --input {d}/collected_text.csv "
         "-o {d}/f.pdf", "collected_text.csv, row 1, field 'iteration_s'"),
    Case("traceback", "bench collectives --min-bytes 1M --max-bytes 1K -o {d}/b.csv",
         "need 4 <= --min-bytes <= --max-bytes, got 1048576 and 1024"),
    Case("traceback", "import sailor {d}/sailor_by_model.json --model OPT-350 -o {d}/s.csv",
         "sailor_by_model.json, field '1': no micro-batch 1 (the file has OPT-350"),
    Case("traceback", "reexec analyze --input {d}/measured_text.csv --stats {d}/st.csv",
         "measured_text.csv, row 1, field 'measured_s': 'abc' is not a number"),
    Case("traceback", "import manifest {d}/manifest_text_ranks.yaml --src {d} -o {d}/mo",
         "manifest_text_ranks.yaml, row 1, field 'files[0].args.world_size': option "
         "'world_size' needs int | None, got 'two'"),
    # --- silent accepts before ---
    Case("silent", "import manifest {d}/manifest_underscore.yaml --src {d} -o {d}/mo",
         "field 'files[0].args.error_tolerance': option 'error_tolerance' needs float, "
         "got '1_0'"),
    Case("silent", "reexec analyze --input {d}/measured_empty.csv --stats {d}/st.csv",
         "measured_empty.csv, row 1, field 'measured_s': missing value"),
    Case("silent", "reexec analyze --input {d}/measured_underscore.csv --stats {d}/st.csv",
         "field 'world_size': '1_6' is not an integer"),
    Case("silent", "bench collectives --world-size 2,2 --max-bytes 1K -o {d}/b.csv",
         "--world-size: a world size is named twice"),
    Case("silent", "report table replay --input {d}/collected_empty.csv --tex {d}/t.tex "
         "--md {d}/t.md", "collected_empty.csv, row 1, field 'iteration_s': missing value"),
    Case("silent", f"{PLAN} --algorithm wfbp --world-size 16",
         "m.csv, field 'world_size': the comm model holds world sizes 4, not --world-size 16"),
    Case("silent", f"{REPLAY} --algorithms wfbp --knob dear.bo_iters=3",
         "planner 'dear' is not run"),
    Case("silent", f"{PLAN} --algorithm wfbp --knob ddp.bucket_cap_mb=5",
         "planner 'ddp' is not run"),
    Case("silent", f"{REPLAY} --algorithms wfbp,ddp,wfbp", "'wfbp' is named twice"),
    Case("silent", f"{REPLAY} --algorithms wfbp --compute-slowdown 2 --interference "
         "{d}/interference.json", "give --compute-slowdown or --interference, not both"),
    Case("silent", "traces validate {d}/falling.csv",
         "falling.csv, line 12, row 11, field 'time_s': time falls as the message grows"),
    Case("silent", "replay --compute {d}/c.csv --comm {d}/falling.csv -o {d}/out.csv",
         "field 'time_s': time falls as the message grows"),
    Case("silent", "traces validate {d}/underscore.csv",
         "underscore.csv, line 2, row 1, field 'numel': '55_296' is not an integer"),
    Case("silent", "traces validate {d}/fullwidth.csv",
         "fullwidth.csv, line 2, row 1, field 'numel'"),
    Case("silent", "traces validate {d}/underscore_float.csv",
         "field 'forward_s': '1_0e-3' is not a number"),
    Case("silent", "import bcaffe {d}/bcaffe_underscore.log --world-size 2 "
         "-o {d}/bc.csv", "bcaffe_underscore.log, line 1, field 'size': '1_00' is not a number"),
    Case("silent", f"{REEXEC} {{d}}/reexec_timeout_underscore.yaml",
         "field 'reexec.settings.timeout_s': '1_0' is not of type 'number'"),
    Case("silent", f"{REEXEC} {{d}}/reexec_world_octal.yaml",
         "field 'reexec.cases[0].world_size': '012' is not of type 'integer'"),
    Case("silent", f"{REEXEC} {{d}}/reexec_allow_load_on.yaml",
         "field 'reexec.settings.allow_load': 'on' is not of type 'boolean'"),
    Case("silent", f"{REEXEC} {{d}}/reexec_empty.yaml", "field 'reexec.cases': no cases"),
    Case("silent", "replay --compute {d}/c.csv --topology {d}/topo_underscore.yaml "
         "-o {d}/out.csv", "topo_underscore.yaml, field 'nodes'"),
    Case("silent", "replay --compute {d}/c.csv --topology {d}/topo_octal.yaml "
         "-o {d}/out.csv", "topo_octal.yaml, field 'ranks_per_node'"),
    Case("silent", f"{RUN} {{d}}/plan_typo.json", "plan_typo.json, field 'bukets': unknown key"),
    Case("silent", f"{RUN} {{d}}/plan_bucket_typo.json",
         "field 'buckets[0].chunk': unknown key"),
    Case("silent", f"{RUN} {{d}}/plan_alg_number.json",
         "field 'buckets[0].algorithm': unknown bucket algorithm 5"),
    Case("silent", f"{RUN} {{d}}/plan_top_alg_list.json",
         "field 'algorithm': algorithm must be a string"),
    Case("silent", "replay --compute {d}/c.csv --comm {d}/ab_twice.json -o {d}/out.csv",
         "ab_twice.json, field 'series[1]': a second all_reduce series at world size 4"),
    Case("silent", "traces validate {d}/sidecar_ranks.csv",
         "sidecar_ranks.meta.json, field 'world_size': 1208925819614629174706176 is greater"),
    Case("silent", "traces validate {d}/sidecar_batch.csv",
         "sidecar_batch.meta.json, field 'batch_size'"),
    Case("silent", "replay --compute {d}/sidecar_iteration.csv --comm {d}/m.csv "
         "-o {d}/out.csv", "sidecar_iteration.meta.json, field 'iteration_s'"),
    Case("silent", "report concat {d}/c.csv {d}/m.csv -o {d}/cat.csv",
         "m.csv: not the columns of"),
    # --- unclear errors before ---
    Case("unclear", "replay --compute {d}/c.csv --ps {d}/folder -o {d}/out.csv",
         "folder: a folder: --ps takes a parameter-server"),
    Case("unclear", "replay --compute {d}/c.csv --comm {d}/folder -o {d}/out.csv",
         "folder: a folder: --comm takes a comm trace"),
    Case("unclear", f"{REPLAY} --interference {{d}}/folder", "(it is a folder"),
    Case("unclear", "traces inventory {d}/folder -o {d}/inv.csv",
         "folder: file not found (it is a folder"),
    Case("unclear", f"{RUN} {{d}}/folder", "folder: plan file not found (it is a folder"),
    Case("unclear", "fit {d}/folder", "folder: file not found (it is a folder"),
    Case("unclear", "bench collectives --algorithms ring,ring --world-size 2 --max-bytes 1K "
         "-o {d}/b.csv", "--algorithms: 'ring' is named twice"),
    Case("unclear", "traces validate {d}/extra_cell.csv",
         "extra_cell.csv, line 2, row 1: 9 cells, but the header has 8"),
    Case("unclear", "replay --compute {d}/c.csv --comm {d}/ab_no_beta.json -o {d}/out.csv",
         "field 'series[0]': malformed alpha-beta-series model: series[0] has no key "
         "'beta_s_per_byte'"),
    Case("unclear", "replay --compute {d}/c.csv --comm {d}/analytic_no_beta.json "
         "--world-size 4 -o {d}/out.csv",
         "analytic_no_beta.json, field 'beta_s_per_byte': malformed analytic model: no key"),
    Case("unclear", "replay --compute {d}/c.csv --comm {d}/interp_series_object.json "
         "-o {d}/out.csv", "field 'series': malformed interp model: series must be a list"),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{i:02d}-{c.kind}" for i, c in
                                             enumerate(CASES)])
def test_bad_input_is_one_clear_line(case: Case, work: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    argv = case.argv.replace("{d}", str(work)).split()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == 2, f"exit {code}, stderr: {err}"
    last = err.strip().splitlines()[-1]
    assert "error:" in last and case.message in last, last


def test_table_counts() -> None:
    """The defects of this family, by class (tracebacks, silent accepts, unclear)."""
    kinds = [c.kind for c in CASES]
    assert (kinds.count("traceback"), kinds.count("silent"), kinds.count("unclear")) == \
        (13, 31, 11)
    assert len({c.argv for c in CASES}) == len(CASES)


# ------------------------------------------------------------------- not refused, warned
def test_compute_trace_of_another_job_size_is_replayed_with_a_warning(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A compute trace captured in an 8-rank job replayed on a 4-rank sweep: the pipeline
    does so on purpose (B-Caffe traces at several world sizes), so it runs, but says so."""
    meta = json.loads((work / "c.meta.json").read_text(encoding="utf-8"))
    (work / "c8.csv").write_text((work / "c.csv").read_text(encoding="utf-8"),
                                 encoding="utf-8")
    (work / "c8.meta.json").write_text(json.dumps({**meta, "world_size": 8}),
                                       encoding="utf-8")
    assert main(["replay", "--compute", str(work / "c8.csv"), "--comm", str(work / "m.csv"),
                 "--algorithms", "wfbp", "-o", str(work / "c8.out.csv")]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "c8.meta.json, field 'world_size'" in err
    assert "job of 8 ranks, replayed at 4 ranks" in err


# ---------------------------------------------------------------- the shared layers, directly
def test_every_committed_comm_trace_still_loads() -> None:
    """The falling-series check refuses no measured trace (noise makes neighbouring sizes
    disagree, never the whole range)."""
    loaded = 0
    for path in sorted((REPO / "traces" / "comm").rglob("*.csv")):
        meta = json.loads(path.with_name(path.stem + ".meta.json").read_text(encoding="utf-8"))
        if meta.get("kind") == "comm":
            CommTrace.load(path)
            loaded += 1
    assert loaded > 50


def test_a_short_falling_range_is_noise_not_refused() -> None:
    """Below 16 x from the smallest to the largest message, by less than 2 x, or below
    1 MiB (a flat, latency-bound range measured on a loaded machine), a falling time is
    noise."""
    _comm([4, 8, 16], [3e-4, 2e-4, 1e-4])
    _comm([4, 2**20], [3e-4, 2e-4])
    _comm([4, 1024], [3e-4, 1e-4])
    with pytest.raises(InputError, match="time falls"):
        _comm([4, 2**20], [3e-4, 1e-4])


@pytest.mark.parametrize("text,value", [
    ("a: 1_6", "1_6"), ("a: 012", "012"), ("a: 1:30", "1:30"), ("a: on", "on"),
    ("a: yes", "yes"), ("a: 0x10", "0x10"), ("a: \uff11\uff16", "\uff11\uff16"),
    ("a: 16", 16), ("a: -3", -3), ("a: 2.5", 2.5), ("a: 1e-3", 1e-3), ("a: true", True),
])
def test_yaml_numbers_are_spelt_as_in_json(text: str, value: object) -> None:
    assert parse_yaml(text, "x.yaml") == {"a": value}


def test_committed_yaml_reads_as_before() -> None:
    import yaml

    paths = [*(REPO / "config").rglob("*.yaml"), REPO / "traces" / "manifest.yaml"]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert parse_yaml(text, path) == yaml.safe_load(text), path


def test_bucket_algorithms_match_the_runtime() -> None:
    """The names plan.py accepts are those the executor runs (checked without torch in
    plan.py, so this test ties the two lists)."""
    pytest.importorskip("torch")
    from gradsched.collectives import COLLECTIVE_ALGORITHMS
    from gradsched.runtime.bucket_layout import REDUCER_ALGORITHMS

    assert set(BUCKET_ALGORITHMS) == {*COLLECTIVE_ALGORITHMS["all_reduce"],
                                      *REDUCER_ALGORITHMS}


def test_config_file_error_is_both_kinds() -> None:
    """A bad reexec setting is a configuration error that names file and field."""
    from gradsched.reexec.config import parse_settings

    with pytest.raises(ConfigError) as info:
        parse_settings({"rounds": 1.5}, "r.yaml")
    assert isinstance(info.value, InputError)
    assert str(info.value).startswith("r.yaml, field 'settings.rounds'")
