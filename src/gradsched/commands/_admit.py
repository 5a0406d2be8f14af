"""Admission of the commands that train a model on local ranks (not a sub-command itself):
the rank count against the CPUs and process limits, and the model's estimated memory
(:mod:`gradsched.workloads.footprint`) times the ranks against the available memory, before
anything starts (:mod:`gradsched.admission`)."""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.admission import check_memory, check_ranks


@dataclass(frozen=True)
class Training:
    """What each rank trains: ``model`` (a zoo name or ``package.module:attr``) on
    ``batch_size`` samples of ``seq_len`` tokens (a text model) in ``dtype``, on
    ``device``."""

    model: str
    batch_size: int
    seq_len: int | None = None
    dtype: str = "fp32"
    device: str = "cpu"


def admit_training(what: str, training: Training, *, ranks: int, threads: int = 1,
                   oversubscribe: bool = False, extra_bytes_per_rank: int = 0) -> None:
    """Refuse a ``seq_len`` the model does not read, and ``ranks`` local ranks training
    ``training.model`` on ``training.batch_size`` samples each when the machine cannot hold
    them (one line: what was asked, what the machine has, what to do).
    ``extra_bytes_per_rank`` adds buffers the caller knows of (a plan's executor buffers).
    On a GPU (``device`` ``cuda...``) the model lives in device memory: only the ranks are
    checked here."""
    from gradsched.workloads.footprint import footprint  # builds the model on meta: torch
    from gradsched.workloads.zoo import check_seq_len

    model, batch_size, seq_len = training.model, training.batch_size, training.seq_len
    dtype, device = training.dtype, training.device
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
