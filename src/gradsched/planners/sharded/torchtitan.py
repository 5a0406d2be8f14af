"""torchtitan's FSDP2 layouts, as its users get them without a flag
(``--parallelism.fsdp_reshard_after_forward default``, no pipeline parallelism).

* ``torchtitan``: ``apply_fsdp_to_decoder`` (pytorch/torchtitan at b5bcd76, 2026-08-21,
  ``torchtitan/distributed/fsdp.py`` L234-368; the layout since 83e6941, 2025-07-28, "Improve
  reshard_after_forward logic", in ``torchtitan/models/llama3/infra/parallelize.py``): the
  token embeddings one unit, resharded after forward (``get_fsdp_reshard_after_forward_policy``
  L112-136: ``default`` -> ``not pp_enabled``); every transformer block one unit, resharded;
  the final norm and the output head one unit, ``reshard_after_forward=False`` ("As an
  optimization, do not reshard_after_forward the last layers by default since FSDP would
  prefetch them immediately", L258-265); then ``fully_shard(model)`` (the root: whatever
  is left). Here the embedding unit is every root layer before the first block and the head
  unit every root layer after the last (a model with tied embeddings, which torchtitan
  groups with the head into one unit, L239-250, cannot be written as contiguous units and is
  priced as untied).
* ``torchtitan-2024``: the layout before that change (at 01f4e50, 2025-07-08,
  ``torchtitan/models/llama3/infra/parallelize.py`` L353-375; first in
  ``torchtitan/parallelisms/parallelize_llama.py`` at 14d422f, 2024-05-10): every block one
  unit, resharded after forward except the last ("do not reshard after forward for the last
  transformer block since FSDP would prefetch it immediately"); the embeddings, final norm
  and head in the root, ``fully_shard(model, reshard_after_forward=True)`` (FSDP2 does not
  reshard its root after forward whatever the flag: ``FSDPState._lazy_init``, as
  :mod:`gradsched.plan_sharded` says).

Prefetch: FSDP2's defaults, as planner ``fsdp2`` (torchtitan sets explicit prefetch lists
only with expert parallelism, ``fsdp.py`` L383-420).
"""

from __future__ import annotations

from gradsched.costmodel.base import CommModel
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import check_depth, units_from_ranges
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import block_ranges, layer_seq

SOURCE = "pytorch/torchtitan b5bcd76 torchtitan/distributed/fsdp.py L234-368"
SOURCE_2024 = "pytorch/torchtitan 01f4e50 torchtitan/models/llama3/infra/parallelize.py " \
    "L353-375"


def torchtitan(trace: ComputeTrace, model: CommModel, world_size: int, *,
               forward_prefetch: int = 1, backward_prefetch: int = 1) -> ShardedPlan:
    """torchtitan's layout (module docstring): embeddings, blocks, norm and head."""
    seq = layer_seq(trace)
    blocks = block_ranges(seq)
    ranges, flags = list(blocks), [True] * len(blocks)
    if blocks and blocks[0][0] > 0:  # the root layers before the first block
        ranges.insert(0, (0, blocks[0][0] - 1))
        flags.insert(0, True)
    if blocks and blocks[-1][1] < seq.n - 1:  # after the last: norm and head, kept gathered
        ranges.append((blocks[-1][1] + 1, seq.n - 1))
        flags.append(False)
    return _plan("torchtitan", units_from_ranges(seq, ranges, flags), (forward_prefetch,
                 backward_prefetch), {"world_size": world_size, "n_blocks": len(blocks),
                                      "source": SOURCE})


def torchtitan_2024(trace: ComputeTrace, model: CommModel, world_size: int, *,
                    forward_prefetch: int = 1, backward_prefetch: int = 1) -> ShardedPlan:
    """torchtitan's earlier layout (module docstring): the last block kept gathered."""
    seq = layer_seq(trace)
    blocks = block_ranges(seq)
    flags = [k < len(blocks) - 1 for k in range(len(blocks))]
    return _plan("torchtitan-2024", units_from_ranges(seq, blocks, flags),
                 (forward_prefetch, backward_prefetch),
                 {"world_size": world_size, "n_blocks": len(blocks), "source": SOURCE_2024})


def _plan(name: str, units: list, depths: tuple[int, int], info: dict) -> ShardedPlan:
    """The plan of ``units`` with its prefetch depths (forward, backward) checked."""
    forward, backward = depths
    return ShardedPlan(
        algorithm=name, units=units,
        forward_prefetch=check_depth("forward_prefetch", forward, len(units)),
        backward_prefetch=check_depth("backward_prefetch", backward, len(units)),
        knobs={"forward_prefetch": forward, "backward_prefetch": backward}, info=info)
