"""GPUs' dense bf16 tensor-core peaks, as their vendors publish them (FLOP/s)."""

from __future__ import annotations

GPU_PEAK_FLOPS: dict[str, float] = {
    "a100": 312e12,  # NVIDIA A100 Tensor Core GPU datasheet: bf16 dense, SXM
    "h100": 989e12,  # NVIDIA H100 datasheet: bf16 dense, SXM5 (1979 with sparsity)
    "h200": 989e12,  # NVIDIA H200 datasheet: the H100's tensor cores, bf16 dense
}

GPU_MEMORY_BYTES: dict[str, float] = {
    "a100": 80 * 2**30,  # A100 80GB (SXM4/PCIe); the 40GB part needs --gpu-memory 40G
    "h100": 80 * 2**30,  # H100 SXM5 80GB HBM3
    "h200": 141e9,  # H200: 141 GB HBM3e
}
"""Memory per GPU, as its vendor publishes it (bytes)."""
