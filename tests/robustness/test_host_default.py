"""``replay --host`` without ``--algorithms`` replays the default algorithms the host-aware
replay can run and names those it left out (on commit 181ccde it failed on
``bytescheduler``, which the default set holds: "the host-aware replay issues collectives
in hook order"). Named algorithms it cannot run are still refused. The trace is the
committed H200 Kineto import of ResNet-50 (it has the host columns).
"""

from __future__ import annotations

import pandas as pd

from gradsched.cli import main
from tests.conftest import REPO
from tests.robustness.refusal import refused

HOST = ["replay", "--compute", str(REPO / "traces/compute/h200-kineto/resnet50-b64-cuda-fp32.csv"),
        "--comm", str(REPO / "traces/comm/external/nccl-abci-intra-anode-8.csv"), "--host"]


def test_the_default_set_replays_what_it_can_and_says_what_it_left_out(tmp_path, capsys):
    out = tmp_path / "h.csv"
    assert main([*HOST, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    note = next(line for line in err.splitlines() if "left out" in line)
    assert "bytescheduler" in note and "--algorithms" in note, note
    replayed = pd.read_csv(out)["algorithm"].tolist()
    assert "bytescheduler" not in replayed and {"ddp", "wfbp"} <= set(replayed)


def test_a_named_algorithm_it_cannot_run_is_still_refused(tmp_path, capsys):
    refused([*HOST, "--algorithms", "ddp,bytescheduler", "-o", str(tmp_path / "h.csv")],
            capsys, "bytescheduler", "hook order")
    assert not (tmp_path / "h.csv").exists()
