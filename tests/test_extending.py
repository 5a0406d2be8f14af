"""README "Extending", followed word for word: a new planner (the README's own example file),
a new compute trace and a new network, added the way the README says in a copy of the package
and of ``config/config.yaml``; then what the workflow does with the configuration (its schema,
its name checks, its cases) and the command its replay rule runs per case, on the new case.

Nothing else may be needed: if a step stops sufficing (a registry list the README does not
name, a check the README does not state), this test fails. The traces are SYNTHETIC, made
here and labelled so; the workflow itself is not started (too slow for a unit test): its rules
``replay_cases_<set>_<network>`` (workflow/rules/replay.smk) run ``gradsched replay`` with
exactly these arguments (one line of a ``gradsched batch`` per case), and
workflow/rules/common.smk resolves the cases and checks the names as below.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, synthetic_comm_trace, synthetic_compute_trace


def _extending() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split("## Extending\n", 1)[1].split("\n## ", 1)[0]


def _bullet(section: str, title: str) -> str:
    """The README bullet that starts with ``* **title**``."""
    match = re.search(rf"^\* \*\*{re.escape(title)}\*\*.*?(?=^\* |\Z)", section,
                      flags=re.M | re.S)
    assert match, f"README 'Extending' has no bullet '{title}'"
    return match.group(0)


def _code(text: str, pattern: str) -> str:
    """The inline code span of ``text`` matching ``pattern`` (a regex)."""
    spans = [s for s in re.findall(r"`([^`]+)`", text) if re.fullmatch(pattern, s)]
    assert spans, f"README 'Extending' shows no `{pattern}`"
    return spans[0]


def _insert_after(text: str, key: str, line: str) -> str:
    """``line`` as the first entry under the top-level ``key:`` of a YAML text."""
    head = f"\n{key}:\n"
    assert head in text, f"config/config.yaml has no top-level '{key}:'"
    return text.replace(head, f"{head}{line}\n", 1)


def _add_planner(src: Path, section: str) -> str:
    """Steps 1 and 2 of "An algorithm": the example file, then the registry's two edits."""
    step = _bullet(section, "An algorithm")
    path = _code(step, r"src/gradsched/planners/\w+\.py")
    blocks = re.findall(r"```python\n(.*?)```", step, flags=re.S)
    assert len(blocks) == 1, "the algorithm recipe shows one example file"
    (src.parent.parent / path).write_text(textwrap.dedent(blocks[0]), encoding="utf-8")
    name = Path(path).stem
    assert "`ALL_PLANNERS`, just before `best`" in step and "to the imports" in step
    init = src / "planners" / "__init__.py"
    text = init.read_text(encoding="utf-8")
    imports = "from gradsched.planners import (\n    best,\n"
    assert imports in text
    text = text.replace(imports, f"{imports}    {name},\n", 1)
    text, n = re.subn(r"(ALL_PLANNERS: tuple\[ModuleType, \.\.\.\] = \([^)]*?)\bbest,",
                      rf"\1{name}, best,", text, count=1)
    assert n == 1, "ALL_PLANNERS does not end with best"
    init.write_text(text, encoding="utf-8")
    return name


def _add_to_config(config: str, section: str, planner: str) -> tuple[str, str, str]:
    """Step 3 of "An algorithm", "A compute trace" and "A network", on the config's text."""
    assert "`algorithms:` in `config/config.yaml`" in _bullet(section, "An algorithm")
    config, n = re.subn(r"^(algorithms: \[.*?)\]$", rf"\1, {planner}]", config, count=1,
                        flags=re.M)
    assert n == 1, "config/config.yaml has no one-line algorithms: list"
    compute_step = _bullet(section, "A compute trace")
    compute_line = _code(compute_step, r"\w+: traces/compute/<folder>/\w+\.csv")
    case_line = _code(compute_step, r"- \{compute: \w+, network: [\w-]+\}")
    network_step = _bullet(section, "A network")
    network_line = _code(network_step, r"[\w-]+: traces/comm/<folder>/\*\.csv")
    network_case = _code(network_step, r"- \{compute: \w+, network: [\w-]+\}")
    compute = compute_line.split(":")[0]
    network = network_line.split(":")[0]
    assert network_case == f"- {{compute: {compute}, network: {network}}}"
    assert case_line.startswith(f"- {{compute: {compute}, ")
    config = _insert_after(config, "compute", "  " + compute_line.replace("<folder>", "toy"))
    config = _insert_after(config, "networks", "  " + network_line.replace("<folder>", "toy"))
    config = _insert_after(config, "cases", "  " + network_case)
    return config, compute, network


# Run in the copy, with the copy's package first on the path: what the workflow checks in
# workflow/rules/common.smk (schema, plain names, algorithm names, cases), then the command
# the replay rules run on every comm trace of the new case, and `plan --algorithm best`.
WORKFLOW = r"""
import glob, json, sys
import jsonschema, yaml
from gradsched.cli import main
from gradsched.pipeline.configfiles import check_names
from gradsched.planners import planner_names
from gradsched.report.algorithms import algorithm_label

compute, network, schema = sys.argv[1:4]
config = yaml.safe_load(open("config/config.yaml"))
jsonschema.validate(config, yaml.safe_load(open(schema)))
check_names(config, "config/config.yaml")
unknown = set(config["algorithms"]) - set(planner_names())
assert not unknown, unknown
cases = [(c["compute"], c["network"]) for c in config["cases"]]
assert (compute, network) in cases
trace = config["compute"][compute]
assert main(["traces", "validate", trace]) == 0
out = {"label": algorithm_label(sys.argv[4]), "replays": []}
for comm in sorted(glob.glob(config["networks"][network])):
    target = f"results/{compute}/{network}/" + comm.rsplit("/", 1)[1]
    args = ["replay", "--compute", trace, "--comm", comm,
            "--algorithms", ",".join(config["algorithms"]),
            "--replay-iters", str(config["replay"]["iterations"]),
            "--channels", str(config["replay"]["channels"]), "-o", target]
    assert main(args) == 0
    out["replays"].append(target)
assert main(["plan", "--compute", trace, "--comm", comm, "--algorithm", "best",
             "-o", "best.plan.json"]) == 0
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def followed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A copy of the package and the config with the README's steps applied, replayed."""
    root = tmp_path_factory.mktemp("extending")
    src = root / "src" / "gradsched"
    shutil.copytree(REPO / "src" / "gradsched", src,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    section = _extending()
    planner = _add_planner(src, section)
    config = (REPO / "config" / "config.yaml").read_text(encoding="utf-8")
    config, compute, network = _add_to_config(config, section, planner)
    (root / "config").mkdir()
    (root / "config" / "config.yaml").write_text(config, encoding="utf-8")
    # the trace files the README's steps drop into traces/ (SYNTHETIC)
    (root / "traces" / "compute" / "toy").mkdir(parents=True)
    synthetic_compute_trace(n=6).save(root / "traces" / "compute" / "toy" / f"{compute}.csv")
    (root / "traces" / "comm" / "toy").mkdir(parents=True)
    sizes = [2 ** k for k in range(2, 24, 2)]
    for world in (2, 4):
        synthetic_comm_trace(sizes, world).save(root / "traces" / "comm" / "toy" / f"p{world}.csv")
    (root / "results" / compute / network).mkdir(parents=True)
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    env = {"PYTHONPATH": str(root / "src"), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-P", "-c", WORKFLOW, compute, network, str(schema),
                          planner], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    return {"root": root, "planner": planner, **result}


def test_the_new_planner_is_replayed_on_the_new_case(followed: dict) -> None:
    import pandas as pd

    assert len(followed["replays"]) == 2
    for target in followed["replays"]:
        frame = pd.read_csv(followed["root"] / target).set_index("algorithm")
        assert followed["planner"] in frame.index and "best" in frame.index
        assert frame.loc["best", "iteration_s"] <= frame.loc[followed["planner"], "iteration_s"]


def test_best_considers_the_new_planner(followed: dict) -> None:
    plan = json.loads((followed["root"] / "best.plan.json").read_text(encoding="utf-8"))
    assert followed["planner"] in plan["info"]["candidates"]


def test_the_new_column_has_a_display_name(followed: dict) -> None:
    assert followed["label"] == followed["planner"].capitalize()
