"""The kineto-gpu importer's host columns on a SYNTHETIC trace (hand-written, not measured:
the one of test_kineto_gpu.py), and on one committed H200 trace."""

from __future__ import annotations

import copy

import pytest

from gradsched.traces.importers.kineto_gpu import Options, parse_gpu_step
from gradsched.traces.importers.kineto_gpu.host import pending_at_waits
from tests.traces.importers.test_kineto_gpu import synthetic_trace


def test_host_columns_only_when_asked():
    g = parse_gpu_step(synthetic_trace(), "synthetic.json", Options())
    assert "host_forward_s" not in g.frame.columns and g.host is None


def test_synthetic_host_times_per_row():
    g = parse_gpu_step(synthetic_trace(), "synthetic.json", Options(host=True))
    f = g.frame
    # forward thread: ops start at 10, 20, 30, 40 us (10 us apart; the loss, last, its own
    # 5 us): linear 1 = 10; relu + linear 2 = 20, plus the loss (tail) = 25, first rows only
    assert f["host_forward_s"].tolist() == pytest.approx([10e-6, 0.0, 25e-6])
    assert f["forward_launches"].tolist() == [1, 0, 3]
    # backward thread: ops 10 us apart; ready 0 = loss, Mm, AccumulateGrad (30 us), ready 1 =
    # ReLU, Addmm, AccumulateGrad (30), ready 2 = the last AccumulateGrad (10); rows are in
    # forward order (ready_order 2, 1, 0); the NCCL launch is not counted
    assert f["host_backward_s"].tolist() == pytest.approx([10e-6, 30e-6, 30e-6])
    assert f["backward_launches"].tolist() == [0, 3, 3]
    assert g.host["host_backward_tail_s"] == pytest.approx(5e-6)
    assert g.host["host_waited_s"] == 0.0


def test_a_blocked_launch_is_not_host_time():
    """The ReLU's launch blocks 200 us (a full queue): its excess over the median launch
    (1 us) is waiting for the GPU, so the host time is the window less 199 us."""
    doc = copy.deepcopy(synthetic_trace())
    for ev in doc["traceEvents"]:
        if ev["name"].startswith("ProfilerStep"):
            ev["dur"] = 5000
        elif ev["ts"] >= 25:
            ev["ts"] += 300
    relu_launch = next(ev for ev in doc["traceEvents"]
                       if ev["cat"] == "cuda_runtime" and ev["ts"] == 21)
    relu_launch["dur"] = 200
    g = parse_gpu_step(doc, "synthetic.json", Options(host=True))
    # relu's window 20..330 = 310 us, less 199 waited; + linear 2 (10) + loss (5)
    assert g.frame["host_forward_s"].tolist() == pytest.approx([10e-6, 0.0, 126e-6])
    assert g.host["host_waited_s"] == pytest.approx(199e-6)
    assert g.frame["forward_s"].tolist() == pytest.approx([40e-6, 0.0, 45e-6])  # unchanged


def test_launch_queue_depth_from_a_committed_h200_trace():
    """gpt2 fp32 on the H200 blocks its launches once about 1020 are pending."""
    from gradsched.traces.importers.kineto.events import complete_events, read_documents

    path = "data/h200/kineto-steps/gpt2-s1024-b8-cuda-fp32.pt.trace.json.gz"
    label, doc = read_documents(path)[0]
    events, _ = complete_events(doc, label)
    assert 1000 <= pending_at_waits(events) <= 1024
