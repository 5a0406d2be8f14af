"""What to change, in the framework's own terms, for each cause.

The settings named are the frameworks' documented ones: ``CUDA_DEVICE_MAX_CONNECTIONS``
(CUDA's number of hardware work queues per device; Megatron-LM asks for 1 so that its
tensor-parallel communication is ordered before the compute it feeds), DDP's
``bucket_cap_mb`` and ``gradient_as_bucket_view`` (``torch/nn/parallel/distributed.py``),
FSDP2's ``set_modules_to_forward_prefetch`` / ``set_modules_to_backward_prefetch``
(``torch/distributed/fsdp/_fully_shard/_fully_shard.py``), DeepSpeed's ZeRO
``overlap_comm``, ``reduce_bucket_size`` and ``stage3_prefetch_bucket_size``, Megatron's
``--overlap-grad-reduce``, ``--overlap-param-gather`` and ``--ddp-bucket-size``.
"""

from __future__ import annotations

FIXES: dict[str, dict[str, str]] = {
    "serialised": {
        "cpu": "issue the collective asynchronously (dist.all_reduce(..., async_op=True) and "
               "wait before the optimizer, as DDP's reducer does); a communication hook "
               "must return the Work's future, not wait on it",
        "ddp": "export CUDA_DEVICE_MAX_CONNECTIONS=32  # or unset it: 1 puts NCCL and "
               "compute in one hardware queue",
        "fsdp2": "export CUDA_DEVICE_MAX_CONNECTIONS=32  # or unset it",
        "deepspeed": "export CUDA_DEVICE_MAX_CONNECTIONS=32; and in the ZeRO config: "
                     '"overlap_comm": true',
        "megatron": "export CUDA_DEVICE_MAX_CONNECTIONS=32  # keep 1 only where tensor-"
                    "parallel communication overlap needs it; with --overlap-grad-reduce",
    },
    "launch-late": {
        "ddp": "DistributedDataParallel(model, gradient_as_bucket_view=True)  # no bucket "
               "copies on the host; then profile what the host does before the launch",
        "fsdp2": "profile the host before the launch (CPU offload, hooks); "
                 "torch.compile or CUDA graphs cut launch overhead",
        "deepspeed": 'ZeRO config: "overlap_comm": true',
        "megatron": "--overlap-grad-reduce",
    },
    "prefetch-missed": {
        "ddp": "issue the forward collective before the compute that precedes it (for "
               "sharded embeddings: TorchRec's TrainPipelineSparseDist)",
        "fsdp2": "for cur, nxt in zip(blocks, blocks[1:]): "
                 "cur.set_modules_to_forward_prefetch([nxt])",
        "deepspeed": 'ZeRO-3 config: "stage3_prefetch_bucket_size": <bytes of two layers>',
        "megatron": "--overlap-param-gather",
    },
    "nothing-to-hide": {
        "ddp": "DistributedDataParallel(model, bucket_cap_mb=<smaller>)  # a smaller last "
               "bucket; gradsched advise picks the caps",
        "fsdp2": "fully_shard the last blocks as smaller units (their reduce-scatter has "
                 "only the first layers' backward left to hide behind)",
        "deepspeed": 'ZeRO config: "reduce_bucket_size": <smaller>',
        "megatron": "--ddp-bucket-size <smaller>",
    },
    "slower-than-sweep": {
        "any": "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING  # check the algorithm, "
               "protocol and transport chosen; then the link (congestion, a degraded NIC)",
    },
    "waiting-on-rank": {
        "cpu": "look at the slow rank: its CPU load (other processes, cores shared), "
               "torch.get_num_threads() and data loading",
        "any": "look at the slow rank: its GPU clocks (nvidia-smi -q -d "
               "CLOCK,PERFORMANCE), data loading and host load",
    },
    "host-bound": {
        "any": "the host sets the pace: a larger batch per rank, torch.compile or CUDA "
               "graphs, more data-loader workers",
    },
}


def fix_text(cause: str, framework: str, cpu: bool = False) -> str:
    """The change for ``cause`` in ``framework``'s terms (a CPU run's own where it has
    one)."""
    table = FIXES[cause]
    return ((table.get("cpu") if cpu else None) or table.get(framework) or table.get("any")
            or table["ddp"])
