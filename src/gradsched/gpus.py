"""GPUs as their vendors publish them: dense bf16 tensor-core peak (FLOP/s), memory (bytes)
and memory bandwidth (bytes/s), one entry per memory variant, each with its datasheet.

The names are what ``--gpu`` accepts and what a trace's ``device`` is matched against
(:func:`gradsched.experiments.sharded.memory.device_memory`, longest name first, a dash
read as a space: ``NVIDIA H100 NVL`` is ``h100-nvl``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    """One GPU model and memory variant (vendor datasheet values)."""

    peak_flops: float
    memory_bytes: float
    memory_Bps: float
    source: str


GPUS: dict[str, Gpu] = {
    "a100": Gpu(312e12, 80 * 2**30, 2.039e12,
                "NVIDIA A100 Tensor Core GPU datasheet (2021): A100 80GB SXM, bf16 dense "
                "312 TFLOP/s, HBM2e 2,039 GB/s; the 40GB part is a100-40gb"),
    "a100-40gb": Gpu(312e12, 40 * 2**30, 1.555e12,
                     "NVIDIA A100 datasheet (2021): A100 40GB SXM, HBM2 1,555 GB/s"),
    "h100": Gpu(989e12, 80 * 2**30, 3.35e12,
                "NVIDIA H100 Tensor Core GPU datasheet (2023): H100 SXM 80GB HBM3, bf16 "
                "dense 989 TFLOP/s (1,979 with sparsity), 3.35 TB/s"),
    "h100-pcie": Gpu(756e12, 80 * 2**30, 2.0e12,
                     "NVIDIA H100 datasheet (2023): H100 PCIe 80GB HBM2e, bf16 dense 756 "
                     "TFLOP/s (1,513 with sparsity), 2 TB/s"),
    "h100-nvl": Gpu(835e12, 94e9, 3.9e12,
                    "NVIDIA H100 datasheet (2023): H100 NVL, 94 GB HBM3 per GPU, bf16 dense "
                    "835 TFLOP/s (1,671 with sparsity), 3.9 TB/s"),
    "gh200": Gpu(989e12, 96e9, 4.0e12,
                 "NVIDIA GH200 Grace Hopper Superchip datasheet (2023): H100 with 96 GB HBM3 "
                 "at 4 TB/s (the 144 GB HBM3e part is not listed), bf16 dense 989 TFLOP/s"),
    "h200": Gpu(989e12, 141e9, 4.8e12,
                "NVIDIA H200 Tensor Core GPU datasheet (2024): 141 GB HBM3e, 4.8 TB/s, the "
                "H100's tensor cores (bf16 dense 989 TFLOP/s)"),
}

GPU_PEAK_FLOPS: dict[str, float] = {name: g.peak_flops for name, g in GPUS.items()}
"""Dense bf16 tensor-core peaks (FLOP/s)."""

GPU_MEMORY_BYTES: dict[str, float] = {name: g.memory_bytes for name, g in GPUS.items()}
"""Memory per GPU (bytes)."""

ASSUMED_GPU = "h100"
"""The GPU ``advise --sharded`` assumes when a GPU run names none: the H100 SXM 80GB, the
GPU of torchtitan's published FSDP2 Llama 3.1 runs (``docs/performance.md``) and the
largest-installed data-centre training GPU of its generation; its 80 GB is also the A100
80GB's, so the cap holds for either."""
