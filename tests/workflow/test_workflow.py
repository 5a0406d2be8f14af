"""The Snakemake workflow: DAG dry-runs, a real smoke run in a temporary working directory,
formatting, and the config schema's error messages."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gradsched.report.latex import parse_macros

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SNAKEMAKE = BIN / "snakemake"
SNAKEFMT = BIN / "snakefmt"
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles", "traces")

pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake is not in the venv")


def run(args: list[str], cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(SNAKEMAKE), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def copy_workflow(dest: Path) -> Path:
    """A fresh working directory with the workflow and the committed traces (no results)."""
    dest.mkdir(parents=True)
    for name in WORKFLOW_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
        else:
            shutil.copy2(src, dest / name)
    return dest


@functools.cache
def dry_run(target: str) -> tuple[int, str]:
    proc = run(["-n", "--forceall", "--nolock", "--cores", "2", target], REPO)
    return proc.returncode, proc.stdout + proc.stderr


def job_counts(output: str) -> dict[str, int]:
    """Rule -> job count from the 'Job stats' table of a dry run."""
    counts: dict[str, int] = {}
    in_table = False
    for line in output.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            in_table = True
            continue
        if in_table and len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
        elif in_table and parts and not parts[0].startswith("-") and counts:
            break
    return counts


@pytest.mark.parametrize("target, expected", [
    ("all", {"replay_cases_main_*", "collect_replay", "fit_files", "fit_models",
             "replay_calibrated", "fit_table", "crossws_series",
             "fit_figures", "replay_reports", "figure_timeline",
             "table", "macros", "compare_numbers", "validate_traces",
             "traces_inventory", "collectives_fit", "collectives_report",
             "compression_report", "topology_check"}),
    ("smoke", {"replay_cases_smoke_*", "collect_replay", "figure_smoke"}),
    ("compare", {"compare_numbers", "table"}),
    ("paper", {"macros", "table", "replay_reports", "reexec_committed", "collectives_report",
               "compression_report", "topology_check"}),
])
def test_dry_run_builds_the_full_dag(target: str, expected: set[str]) -> None:
    code, output = dry_run(target)
    assert code == 0, output
    counts = job_counts(output)
    missing = {name for name in expected
               if not any(re.fullmatch(name.replace("*", ".+"), rule) for rule in counts)}
    assert not missing, f"rules missing from the {target} DAG: {missing}\n{output}"
    if target == "all":
        config = yaml.safe_load((REPO / "config/config.yaml").read_text())
        # the per-case steps run as one job per family: a replay job per network of the
        # cases (its comm traces and extrapolated world sizes), one for every fit table,
        # one for the fitted models, one for the calibrated replays
        replays = {rule: n for rule, n in counts.items() if rule.startswith("replay_cases_")}
        assert set(replays.values()) == {1}
        assert len(replays) == len({case["network"] for case in config["cases"]})
        assert counts["fit_files"] == counts["fit_models"] == counts["replay_calibrated"] == 1
        assert counts["table"] == 6  # the first stops' and the topology check's
        # the replay result's figures and tables: one job
        assert counts["replay_reports"] == 1
        assert not {"figure_replay", "figure_gaps", "figure_gpu_generations",
                    "table_replay_family", "figure_fit_curves", "figure_fit_mape"} & set(counts)


@pytest.mark.parametrize("target, expected", [
    ("capture_cpu", {"capture_compute", "capture_comm_loopback", "capture_iteration"}),
    ("capture_cluster", {"capture_comm_cluster"}),
    ("collectives_measure", {"collectives_measure_one"}),
    ("compression_run", {"compression_run"}),
])
def test_dry_run_of_hardware_targets(target: str, expected: set[str]) -> None:
    code, output = dry_run(target)
    assert code == 0, output
    missing = expected - set(job_counts(output))
    assert not missing, f"rules missing from the {target} DAG: {missing}\n{output}"
    # measuring never writes into the committed traces
    assert "output: traces/" not in output


def test_reexec_plans_with_the_calibrated_interference() -> None:
    code, output = dry_run("reexec")
    assert code == 0, output
    counts = job_counts(output)
    spec = yaml.safe_load((REPO / "config/reexec.yaml").read_text())["reexec"]
    assert counts["reexec_run"] == len(spec["cases"])
    inter = spec["interference"]
    assert counts["reexec_interference"] == len(inter["networks"]) * len(inter["world_sizes"])
    # every case's best planner scores with its own network's and world size's calibration
    runs = [line for line in output.splitlines() if "reexec run --config" in line]
    assert len(runs) == len(spec["cases"])
    for line in runs:
        case = line.split("--case ")[1].split()[0]
        network, world = case.split("-")[-1], case.split("-")[-2]
        assert f"--interference results/reexec/interference-{network}-{world}.json" in line
    collect = [line for line in output.splitlines() if "reexec collect" in line]
    assert len(collect) == 1 and "tbf100mbit-p3=results/reexec/interference-tbf100mbit-p3" \
        in collect[0]


def test_all_has_no_hardware_or_optional_rules() -> None:
    counts = job_counts(dry_run("all")[1])
    assert "import_check" not in counts  # optional: needs the external folder
    measuring = {"reexec_run", "reexec_interference", "reexec_collect", "reexec_analyze",
                 "collectives_measure_one", "compression_run", "compression_profile"}
    assert not any(rule.startswith("capture") or rule in measuring for rule in counts)
    assert "reexec_committed" in counts  # drawn from the committed measurements


def test_every_rule_has_a_log() -> None:
    targets = {"all", "smoke", "replay", "figures", "tables", "paper", "compare"}
    rule_re = re.compile(r"^\s*rule (\w+):", re.MULTILINE)
    sources = [REPO / "Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]
    seen = 0
    for path in sources:
        text = path.read_text()
        matches = list(rule_re.finditer(text))
        for match, following in zip(matches, [*matches[1:], None], strict=False):
            body = text[match.end(): following.start() if following else len(text)]
            runs_a_job = re.search(r"^\s*(shell|script|run|notebook|wrapper):", body,
                                   re.MULTILINE)
            if match.group(1) in targets or not runs_a_job:
                continue  # target rules only collect inputs
            seen += 1
            assert re.search(r"^\s*log:", body, re.MULTILINE), \
                f"{path.name}: rule {match.group(1)} has no log:"
    assert seen >= 15


def test_snakefmt_check() -> None:
    if not SNAKEFMT.exists():
        pytest.skip("snakefmt is not in the venv")
    proc = subprocess.run([str(SNAKEFMT), "--check", "Snakefile", "workflow/rules"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _schema_error(config: dict) -> str:
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    with pytest.raises(WorkflowError) as info:
        validate(config, str(REPO / "workflow/schemas/config.schema.yaml"))
    return str(info.value)


def good_config() -> dict:
    return yaml.safe_load((REPO / "config/config.yaml").read_text())


def test_schema_accepts_the_shipped_configs() -> None:
    from snakemake.utils import validate

    schema = str(REPO / "workflow/schemas/config.schema.yaml")
    validate(good_config(), schema)
    merged = good_config()
    merged.update(yaml.safe_load((REPO / "config/smoke.yaml").read_text()))
    validate(merged, schema)


def test_schema_fills_defaults() -> None:
    from snakemake.utils import validate

    config = good_config()
    del config["replay"]
    validate(config, str(REPO / "workflow/schemas/config.schema.yaml"))
    assert config["replay"] == {"iterations": 5, "channels": 1}


@pytest.mark.parametrize("mutate, needle", [
    (lambda c: c["replay"].update(iterations=1), "iterations"),
    (lambda c: c.update(algoritms=["wfbp"]), "algoritms"),
    (lambda c: c["fit"].update(models="cubic"), "cubic"),
    (lambda c: c.update(compute={"bad name!": "x.csv"}), "bad name!"),
])
def test_schema_rejects_bad_config_with_a_clear_message(mutate, needle: str) -> None:
    config = good_config()
    mutate(config)
    message = _schema_error(config)
    assert needle in message


def test_bad_config_stops_snakemake_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("replay: {iterations: 1}\n")
    proc = run(["-n", "--nolock", "--cores", "1", "all", "--configfile", str(bad)], REPO)
    assert proc.returncode != 0
    assert "iterations" in proc.stdout + proc.stderr


def test_unknown_algorithm_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("algorithms: [wfbp, nosuchplanner]\n")
    proc = run(["-n", "--nolock", "--cores", "1", "all", "--configfile", str(bad)], REPO)
    assert proc.returncode != 0
    assert "nosuchplanner" in proc.stdout + proc.stderr


def _is_pdf(path: Path) -> bool:
    return path.stat().st_size > 1000 and path.read_bytes()[:5] == b"%PDF-"


def _is_png(path: Path) -> bool:
    return path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_smoke_runs_for_real_then_nothing_to_do(tmp_path: Path) -> None:
    wd = copy_workflow(tmp_path / "wd")
    proc = run(["--cores", "2", "smoke"], wd, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the smoke set's replays ran as one batch job, each case with its own log
    config = yaml.safe_load((wd / "config/config.yaml").read_text())
    network = config["smoke"]["network"]
    cases = sorted((wd / f"results/replay/smoke/{config['smoke']['compute']}/{network}")
                   .glob("*.csv"))
    batch_log = (wd / f"logs/replay/smoke/{network}.batch.log").read_text()
    assert f"gradsched batch: {len(cases)} commands" in batch_log, batch_log
    assert all((wd / "logs" / case.relative_to(wd / "results")).with_suffix(".log").is_file()
               for case in cases)
    fig = wd / "results/smoke/replay-vs-world-size"
    assert _is_pdf(fig.with_suffix(".pdf"))
    assert _is_png(fig.with_suffix(".png"))
    # every job wrote its log
    logs = sorted((wd / "logs").rglob("*.log"))
    assert any("replay/smoke" in str(p) for p in logs) and any("smoke" in p.name or
                                                                "figure" in p.name for p in logs)
    collected = pd.read_csv(wd / "results/replay/smoke/replay.csv")
    assert set(collected["algorithm"]) == set(config["smoke"]["algorithms"])
    assert {"trace", "network", "nodes", "iteration_s", "lower_bound_s"} <= set(collected)
    assert (collected["iteration_s"] >= collected["lower_bound_s"] * (1 - 1e-9)).all()
    # a second run has nothing to do (make reproduce twice = no work the second time)
    again = run(["-n", "--cores", "2", "smoke"], wd)
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr
    # the macros computed from that result match the CSV
    macros = wd / "macros.tex"
    subprocess.run([sys.executable, "-m", "gradsched", "report", "macros", "--replay",
                    str(wd / "results/replay/smoke/replay.csv"), "-o", str(macros)],
                   check=True, capture_output=True)
    values = parse_macros(macros.read_text())
    top = collected[collected["world_size"] == collected["world_size"].max()]
    wfbp = top.loc[top["algorithm"] == "wfbp", "iteration_s"].iloc[0]
    mg = top.loc[top["algorithm"] == "mgwfbp", "iteration_s"].iloc[0]
    assert values["HeadlineWorldSize"] == str(int(top["world_size"].iloc[0]))
    assert values["HeadlineMgwfbpSpeedupOverWfbp"] == f"{wfbp / mg:.2f}"
    assert values["NumReplayCases"] == str(collected.groupby(["trace", "network",
                                                              "world_size"]).ngroups)


def test_a_second_configuration_never_writes_the_papers_outputs() -> None:
    """The smoke configuration writes under its own results directory, never the
    paper's."""
    proc = run(["-n", "--forceall", "--nolock", "--cores", "2", "all", "--configfile",
                "config/smoke.yaml"], REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    outputs = [line.split(":", 1)[1].strip() for line in proc.stdout.splitlines()
               if line.strip().startswith("output:")]
    paths = [p.strip() for line in outputs for p in line.split(",")]
    assert paths, "the dry run listed no outputs"
    assert [p for p in paths if p.startswith(("paper/", "logs/"))] == []
    assert all(p.startswith("results/smoke-config/") for p in paths), paths[:5]


def test_snakemake_advise_target_is_not_in_all() -> None:
    """``sm advise`` plans the example advice; ``all`` does not include it."""
    import subprocess
    import sys

    snakemake = Path(sys.executable).parent / "snakemake"
    if not snakemake.exists():
        pytest.skip("snakemake is not in the venv")

    def dry(target: str) -> str:
        proc = subprocess.run([str(snakemake), "-n", "--forceall", "--nolock", "--cores", "1",
                               target], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    out = dry("advise")
    assert "advise_example" in out and "results/advise/example.txt" in out
    assert "advise_example" not in dry("all")
