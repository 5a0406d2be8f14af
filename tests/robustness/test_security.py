"""Data never selects code, and a name from a config file never leaves its folder
(``docs/errors.md``): gradsched runs as root on shared machines, so a sidecar, a config file
or a file planted in the working folder must not make it run code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradsched.distributed.launch import LaunchSpec, launch
from gradsched.distributed.worker import load_task
from gradsched.errors import ConfigError, InputError
from gradsched.names import package_task, plain_name, registry_model, user_import_path
from gradsched.pipeline import capture as capture_stage
from gradsched.pipeline.configfiles import check_names
from gradsched.reexec.config import parse_cases
from gradsched.workloads.zoo import load_user_factory

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
R18 = REPO / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv"
LOOP2 = REPO / "traces/comm/cpu/gloo-loopback-p2.csv"

PLANTED = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


def _plant(folder: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """Modules in ``folder`` that write a marker file when imported (and expose ``make``
    as a model factory); the markers by module name."""
    markers = {}
    for name in names:
        marker = folder / f"{name}.ran"
        (folder / f"{name}.py").write_text(
            PLANTED.format(marker=str(marker)) + "def make(**kw):\n    raise SystemExit(9)\n"
            "def run(*a):\n    return {}\n", encoding="utf-8")
        markers[name] = marker
    return markers


def _gradsched(cwd: Path, *args: str, safe: bool = False) -> subprocess.CompletedProcess:
    """``python -m gradsched ARGS`` in ``cwd`` (the package from PYTHONPATH, explicit)."""
    env = dict(os.environ, PYTHONPATH=str(SRC))
    env.pop("PYTHONSAFEPATH", None)
    cmd = [sys.executable, *(["-P"] if safe else []), "-m", "gradsched", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _trace_with_model(folder: Path, model: str) -> Path:
    """A copy of the committed ResNet-18 trace whose sidecar names ``model``."""
    csv = folder / "trace.csv"
    shutil.copyfile(R18, csv)
    meta = json.loads(R18.with_name(R18.stem + ".meta.json").read_text(encoding="utf-8"))
    meta["model"] = model
    (folder / "trace.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return csv


# ------------------------------------------------------------------ models from data
@pytest.mark.parametrize("model", ["evil:make", "os:system", "gradsched.names:plain_name"])
def test_a_model_from_data_naming_code_is_refused(model: str) -> None:
    with pytest.raises(InputError, match="names code") as info:
        registry_model(model, path="t.meta.json", field="model")
    assert "t.meta.json" in str(info.value) and "field 'model'" in str(info.value)
    assert "--model" in str(info.value)  # says how to proceed


def test_a_zoo_name_from_data_is_accepted() -> None:
    assert registry_model("resnet18", path="x", field="model") == "resnet18"


def test_advise_refuses_a_sidecar_model_and_never_imports_it(tmp_path: Path) -> None:
    """``advise --validate`` with a sidecar naming ``evil:make``: exit 2 naming the sidecar,
    before any work; the planted ``evil.py`` in the working folder never runs."""
    markers = _plant(tmp_path, ("evil",))
    trace = _trace_with_model(tmp_path, "evil:make")
    done = _gradsched(tmp_path, "advise", "--compute", trace.name, "--comm", str(LOOP2),
                      "--validate", "--batch-size", "16")
    assert done.returncode == 2, done.stderr
    assert "trace.meta.json" in done.stderr and "names code" in done.stderr
    assert "Traceback" not in done.stderr
    assert not markers["evil"].exists()


def test_a_planted_module_in_the_working_folder_is_never_imported(tmp_path: Path) -> None:
    """``python -m gradsched`` in a folder holding ``evil.py`` (asked for explicitly as
    ``--model evil:make``) and ``pandas.py``/``yaml.py`` (shadowing libraries it imports):
    none of them runs; the user model is refused with how to proceed."""
    markers = _plant(tmp_path, ("evil", "pandas", "yaml"))
    trace = _trace_with_model(tmp_path, "resnet18")
    done = _gradsched(tmp_path, "advise", "--compute", trace.name, "--comm", str(LOOP2),
                      "--validate", "--model", "evil:make", "--batch-size", "16",
                      "--rounds", "1")
    assert done.returncode == 2, done.stderr
    assert "evil:make" in done.stderr and "working folder is never searched" in done.stderr
    assert "PYTHONPATH" in done.stderr
    assert [name for name, marker in markers.items() if marker.exists()] == []


def test_python_P_runs_the_cli_without_the_working_folder(tmp_path: Path) -> None:
    """The workflow's ``python -P -m gradsched``: a planted ``pandas.py`` never runs."""
    markers = _plant(tmp_path, ("pandas",))
    done = _gradsched(tmp_path, "fit", str(LOOP2), safe=True)
    assert done.returncode == 0, done.stderr
    assert not markers["pandas"].exists()
    done = _gradsched(tmp_path, "fit", str(LOOP2))
    assert done.returncode == 0, done.stderr
    assert not markers["pandas"].exists()


def test_user_models_load_from_an_explicit_folder_only(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The working folder (``''`` or the folder itself) is dropped from the path a user
    model is imported from; a folder named in PYTHONPATH still counts."""
    markers = _plant(tmp_path, ("usermodel_cwd",))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), *sys.path])
    monkeypatch.setenv("PYTHONPATH", str(SRC))
    assert "" not in user_import_path() and str(tmp_path) not in user_import_path()
    with pytest.raises(ConfigError, match="working folder is never searched"):
        load_user_factory("usermodel_cwd:make")
    assert not markers["usermodel_cwd"].exists()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SRC), str(tmp_path)]))
    assert callable(load_user_factory("usermodel_cwd:make"))  # explicit: allowed
    assert markers["usermodel_cwd"].exists()
    sys.modules.pop("usermodel_cwd", None)


@pytest.mark.parametrize("name", ["../evil:make", "evil:", "evil:make()", "a b:c"])
def test_malformed_user_model_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError):
        load_user_factory(name)


# ------------------------------------------------------------------ rank tasks
@pytest.mark.parametrize("task", ["evil:run", "os:system", "gradschedx.mod:run",
                                  "gradsched.runtime.tasks", "gradsched.x:y.z",
                                  "gradsched/../evil:run", ""])
def test_tasks_outside_the_package_are_refused(task: str) -> None:
    with pytest.raises(ConfigError, match="refused"):
        package_task(task)
    with pytest.raises(SystemExit, match="refused"):
        load_task(task)
    with pytest.raises(ConfigError, match="refused"):
        launch(task, {}, LaunchSpec(1))


def test_package_tasks_are_accepted() -> None:
    assert package_task("gradsched.distributed.tasks:allreduce_ranks")
    assert callable(load_task("gradsched.distributed.tasks:allreduce_ranks"))


def test_the_worker_refuses_a_foreign_task_before_importing_it(tmp_path: Path) -> None:
    markers = _plant(tmp_path, ("evil",))
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run([sys.executable, "-m", "gradsched.distributed.worker", "--task",
                           "evil:run", "--workdir", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "refused" in done.stderr
    assert not markers["evil"].exists()


# ------------------------------------------------------------------ plain names
BAD_NAMES = ["../escape", "/etc/cron.d/x", "a/b", ".hidden", "..", "", "a\\b", "x\ny",
             "name with space", "x" * 201]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_non_plain_names_are_refused(name: str) -> None:
    with pytest.raises(InputError, match="not a plain name"):
        plain_name(name, path="cfg.yaml", field="cases[0].name")


@pytest.mark.parametrize("name", ["resnet18-b4-p2-loopback", "a_b.c", "0x", "bert-base"])
def test_plain_names_are_accepted(name: str) -> None:
    assert plain_name(name) == name


CASE = {"model": "resnet18", "batch_size": 4, "world_size": 2, "network": "loopback",
        "compute": "t.csv"}


@pytest.mark.parametrize("name", ["../../outside", "/tmp/abs", "sub/dir", ".dot"])
def test_reexec_case_names_that_leave_the_output_folder_are_refused(name: str) -> None:
    with pytest.raises(InputError) as info:
        parse_cases([CASE | {"name": name}], "config/reexec.yaml")
    text = str(info.value)
    assert "config/reexec.yaml" in text and "cases[0].name" in text


def test_reexec_case_model_naming_code_is_refused() -> None:
    with pytest.raises(InputError, match="names code") as info:
        parse_cases([CASE | {"model": "evil:make"}], "config/reexec.yaml")
    assert "cases[0].model" in str(info.value)


@pytest.mark.parametrize("spec, field", [
    ({"comm": {"loopback": [{"name": "../x"}]}}, "capture.comm.loopback[0].name"),
    ({"compute": [{"model": "resnet18", "batch_size": 1, "stem": "../../x"}]},
     "capture.compute[0].stem"),
    ({"compute": [{"model": "resnet18", "batch_size": 1, "device": "../x"}]},
     "capture.compute[0].device"),
    ({"compute": [{"model": "evil:make", "batch_size": 1}]}, "capture.compute[0].model"),
])
def test_capture_config_names_are_plain(spec: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        capture_stage.tier_targets({"tiers": ["cpu"], **spec}, "results")


def test_iteration_names_are_plain() -> None:
    spec = {"iteration": [{"name": "/abs", "model": "resnet18", "batch_size": 1}]}
    with pytest.raises(ConfigError, match=r"capture.iteration\[0\].name"):
        capture_stage.iteration_entries(spec, False)


@pytest.mark.parametrize("key", ["compute", "networks", "topologies"])
def test_workflow_config_keys_are_plain(key: str) -> None:
    with pytest.raises(ConfigError, match=f"field '{key}.../x'"):
        check_names({key: {"../x": {}}}, "config/config.yaml")
    assert check_names({key: {"ok-name": {}}}, "config/config.yaml")


def test_workflow_case_families_are_plain() -> None:
    with pytest.raises(ConfigError, match=r"field 'cases\[1\].family'"):
        check_names({"cases": [{"family": "cpu"}, {"family": "../../paper"}]}, "config.yaml")


def test_the_committed_configs_pass() -> None:
    import yaml

    check_names(yaml.safe_load((REPO / "config/config.yaml").read_text()), "config.yaml")
    capture = yaml.safe_load((REPO / "config/capture.yaml").read_text())["capture"]
    assert capture_stage.tier_targets({**capture, "tiers": ["cpu", "cluster", "gpu"]},
                                      "results")
    reexec = yaml.safe_load((REPO / "config/reexec.yaml").read_text())["reexec"]
    assert parse_cases(reexec["cases"], "config/reexec.yaml")
