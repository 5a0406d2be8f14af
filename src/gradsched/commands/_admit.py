"""Admission of the commands that train a model on local ranks (not a sub-command itself):
the rank count against the CPUs and process limits, and the model's estimated memory
(:mod:`gradsched.workloads.footprint`) times the ranks against the available memory, before
anything starts (:mod:`gradsched.admission`)."""

from __future__ import annotations

from gradsched.admission import check_memory, check_ranks


def admit_training(what: str, *, model: str, batch_size: int, ranks: int, threads: int = 1,
                   seq_len: int | None = None, dtype: str = "fp32", oversubscribe: bool = False,
                   extra_bytes_per_rank: int = 0, device: str = "cpu") -> None:
    """Refuse a ``seq_len`` ``model`` does not read, and ``ranks`` local ranks training
    ``model`` on ``batch_size`` samples each when the machine cannot hold them (one line:
    what was asked, what the machine has, what to do).
    ``extra_bytes_per_rank`` adds buffers the caller knows of (a plan's executor buffers).
    On a GPU (``device`` ``cuda...``) the model lives in device memory: only the ranks are
    checked here."""
    from gradsched.workloads.footprint import footprint  # builds the model on meta: torch
    from gradsched.workloads.zoo import check_seq_len

    check_seq_len(model, seq_len)
    check_ranks(what, ranks, threads, oversubscribe=oversubscribe)
    if device.startswith("cuda"):
        return
    fp = footprint(model, seq_len=seq_len, dtype=dtype)
    per_rank = fp.training_bytes(batch_size) + extra_bytes_per_rank
    check_memory(what, per_rank, ranks,
                 detail=f"model {model}: {fp.parameter_bytes} parameter bytes, about "
                 f"{fp.activation_bytes_per_sample} activation bytes per sample x batch "
                 f"{batch_size}",
                 proceed="use a smaller --batch-size, fewer ranks or a smaller model")
