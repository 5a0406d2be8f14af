"""FSDP2's accumulation modes run for real (2 gloo ranks, a stack of linear layers, one unit
per layer, k = 1 and 4; :func:`gradsched.runtime.accum_modes.accumulation_modes`) against
the replay of the same units (:mod:`gradsched.replay.sharded_accum`): the all-gathers and
reduce-scatters of a step, counted at the ``torch.distributed`` calls, equal the replay's,
and the peak of unsharded parameters and gradients FSDP2 held is within 10 % of the
replay's ``gathered_peak_bytes``. The trace's bytes are the model's; its times are
SYNTHETIC (blocking semantics: counts and the peak do not depend on them)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

LAYERS, WIDTH, BATCH = 4, 256, 2
RUNS = [("no-sync", 1), ("sync-every", 1), ("no-sync", 4), ("sync-every", 4)]
TOLERANCE = 0.10


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    return launch("gradsched.runtime.accum_modes:accumulation_modes",
                  {"layers": LAYERS, "width": WIDTH, "batch": BATCH,
                   "runs": [list(r) for r in RUNS]},
                  LaunchSpec(2, op_timeout_s=60, deadline_s=240))


def stack_trace():
    """The measured stack as a compute trace: its parameters' bytes, SYNTHETIC times."""
    import pandas as pd

    from gradsched.runtime.accum_modes import stack
    from gradsched.traces import ComputeTrace
    from tests.replay.test_sharded import META

    params = list(stack(LAYERS, WIDTH).named_parameters())
    frame = pd.DataFrame({"name": [n for n, _ in params],
                          "layer": [int(n.split(".")[0]) for n, _ in params],
                          "numel": [p.numel() for _, p in params],
                          "bytes": [4 * p.numel() for _, p in params],
                          "forward_s": 1e-4, "backward_s": 2e-4, "update_s": 0.0,
                          "ready_order": list(range(len(params)))[::-1]})
    return ComputeTrace.from_frame(frame, META)


def _predicted(mode: str, k: int):
    from gradsched.costmodel import AlphaBetaModel
    from gradsched.replay.sharded_accum import replay_mode
    from gradsched.runtime.accum_modes import stack_plan

    return replay_mode(stack_trace(), stack_plan(LAYERS), AlphaBetaModel(1e-4, 1e-9), 2, mode,
                       grad_accum=k, semantics="blocking")


@pytest.mark.parametrize(("mode", "k"), RUNS)
def test_the_replay_counts_the_collectives_fsdp2_issued(ranks, mode, k) -> None:
    predicted = _predicted(mode, k)
    for rank in ranks:
        counts = rank[f"{mode}-k{k}"]["collectives"]
        assert counts["all_gather"] == predicted.all_gathers
        assert counts["reduce_scatter"] == predicted.reduce_scatters
        assert counts["all_reduce"] == 0


@pytest.mark.parametrize(("mode", "k"), RUNS)
def test_the_peak_fsdp2_held_is_within_10_percent_of_the_replay(ranks, mode, k) -> None:
    predicted = _predicted(mode, k).replay.gathered_peak_bytes
    for rank in ranks:
        assert rank[f"{mode}-k{k}"]["fsdp_peak_bytes"] == pytest.approx(predicted,
                                                                       rel=TOLERANCE)


def test_skipping_sync_keeps_the_whole_unsharded_gradient(ranks) -> None:
    """The measured difference of the modes at k = 4 is the model's gradients, unsharded
    (less the one unit's gradient that sync-every holds too), and at k = 1 none."""
    from gradsched.runtime.accum_modes import stack

    grads = sum(4 * p.numel() for p in stack(LAYERS, WIDTH).parameters())
    unit = grads / LAYERS
    for rank in ranks:
        extra = rank["no-sync-k4"]["fsdp_peak_bytes"] - rank["sync-every-k4"]["fsdp_peak_bytes"]
        assert extra == pytest.approx(grads - unit, rel=TOLERANCE)
        assert rank["no-sync-k1"]["fsdp_peak_bytes"] == rank["sync-every-k1"]["fsdp_peak_bytes"]
