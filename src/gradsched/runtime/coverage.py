"""Does a plan cover this model? Checked before any rank starts, on PyTorch's meta device.

A plan names tensors (the compute trace's); the ranks run a model built by name
(:func:`gradsched.workloads.build_model`). Every trainable parameter of the model must be
in exactly one bucket and the plan must name nothing else (the executor's layout rules,
:meth:`gradsched.plan.Plan.check_covers`); a plan made for another model fails here with
one line naming the first name missing on each side, instead of a rank's traceback. The
same comparison holds a compute trace's names against the model's (a sharded plan leaves
the root module's tensors unnamed, so the trace it was made from is checked too). Behind
the pre-launch gate, :mod:`gradsched.runtime.prelaunch`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from gradsched.errors import InputError
from gradsched.plan import Plan
from gradsched.workloads import build_model


def model_parameters(model: str, batch_size: int, seq_len: int | None) -> dict[str, int]:
    """Trainable parameter names -> element counts of ``model``, built on PyTorch's meta
    device (no memory, no data), as the ranks will build it."""
    with torch.device("meta"):
        spec = build_model(model, batch_size, device="meta", seq_len=seq_len)
    return {name: p.numel() for name, p in spec.model.named_parameters() if p.requires_grad}


def check_names_are_parameters(named: Iterable[str], trainable: Mapping[str, int], *,
                               model: str, source: str, hint: str = "",
                               what: str = "plan") -> None:
    """Refuse unless the tensors ``named`` by the ``what`` (a plan, a trace) are exactly
    ``model``'s trainable parameters (``trainable``: :func:`model_parameters`). The error
    names the first name missing on each side and ``source`` (the plan or trace file);
    ``hint`` is appended (what the user should give instead)."""
    names = set(trainable)
    given = set(named)
    if names != given:
        missing = sorted(names - given)
        extra = sorted(given - names)
        raise InputError(
            f"the {what}'s tensors are not model {model!r}'s parameters (the trainable ones "
            f"of model.named_parameters()): {len(missing)} in the model, not the {what} "
            f"(first: {missing[0] if missing else 'none'!r}); {len(extra)} in the {what} "
            f"that the model does not have (first: {extra[0] if extra else 'none'!r}){hint}",
            path=source,
            field="tensors" if what == "plan" else "name")


def check_plan_covers_model(plan: Plan, trainable: Mapping[str, int], *, model: str,
                            source: str, hint: str = "") -> None:
    """Refuse ``plan`` unless its tensors are exactly ``model``'s trainable parameters
    (``trainable``: :func:`model_parameters`), each in one bucket
    (:func:`check_names_are_parameters`)."""
    check_names_are_parameters((t for b in plan.buckets for t in b.tensors), trainable,
                               model=model, source=source, hint=hint)
    try:
        plan.check_covers(list(trainable))
    except InputError as exc:
        raise InputError(exc.reason.replace("the trace", "the model"), path=source,
                         field=exc.field) from None
