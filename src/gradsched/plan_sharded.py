"""``ShardedPlan``: a plan for sharded data parallelism (PyTorch FSDP2 ``fully_shard``,
DeepSpeed ZeRO-3), the one-level-up sibling of :class:`gradsched.plan.Plan`.

Parameters, gradients and optimizer state are sharded over the ``P`` ranks. The plan says
how the parameters are grouped into *units* (FSDP2: one ``fully_shard`` call, whose
parameters are all-gathered together before the unit's forward and whose gradients are
reduce-scattered together after its backward) and when the all-gathers are issued:

* ``units``: each a set of tensors (by name) forming a contiguous run of layers in forward
  order, with ``reshard_after_forward`` (free the gathered parameters after the unit's
  forward and all-gather them again before its backward; FSDP2's default, ``True``);
* the *root*: every tensor in no unit. As FSDP2's root module (``fully_shard(model)``) it is
  all-gathered first and is never resharded after forward (``FSDPState._lazy_init``: "For
  the root, do not reshard after forward"); its gradients are reduce-scattered once the
  whole backward is done;
* ``forward_prefetch``: unit ``k``'s all-gather is issued when unit ``k - d`` starts its
  forward (``set_modules_to_forward_prefetch``; 0 = at unit ``k``'s own pre-forward);
* ``backward_prefetch``: unit ``k``'s backward all-gather is issued when unit ``k + d``
  starts its backward (``set_modules_to_backward_prefetch``; FSDP2 prefetches one unit by
  default, ``FSDPParamGroup._backward_prefetch``);
* ``keep_unsharded_between_microbatches`` (default false; written only when true): with
  gradient accumulation, ``model.set_reshard_after_backward(False)`` besides
  ``set_requires_gradient_sync(False)`` on every micro-batch but the last of a step, so the
  parameters stay gathered from one micro-batch to the next (FSDP2,
  ``torch/distributed/fsdp/_fully_shard/_fully_shard.py``, ``set_reshard_after_backward``;
  priced by :mod:`gradsched.replay.sharded`). Nothing changes with one micro-batch.
* ``mixed_precision`` (written only when set): the dtypes the collectives move, FSDP2's
  ``MixedPrecisionPolicy`` and torchao's float8 all-gather
  (:class:`gradsched.collective_dtypes.CollectiveDtypes`); absent, every collective moves
  the trace's bytes.

The JSON form is versioned (``format_version``); loading an unknown version fails clearly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.errors import InputError
from gradsched.io import read_json, write_json_atomic
from gradsched.plan_mesh import DeviceMeshShape, Reshard

FORMAT = "gradsched.sharded_plan"
FORMAT_VERSION = 1
PLAN_KEYS = frozenset({"format", "format_version", "algorithm", "knobs", "info", "units",
                       "forward_prefetch", "backward_prefetch",
                       "keep_unsharded_between_microbatches", "mixed_precision", "mesh"})
UNIT_KEYS = frozenset({"tensors", "reshard_after_forward"})
MAX_PREFETCH = 64

MAX_UNITS = 100_000
"""Most units a sharded plan may hold (as many collectives per iteration as a plan)."""


@dataclass(frozen=True)
class Unit:
    """Tensors all-gathered and reduce-scattered together (one ``fully_shard`` call)."""

    tensors: tuple[str, ...]
    reshard_after_forward: Reshard = True
    """``True``, ``False``, or an integer: the world size to reshard to after forward
    (:mod:`gradsched.plan_mesh`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"tensors": list(self.tensors),
                "reshard_after_forward": self.reshard_after_forward}


@dataclass(frozen=True)
class ShardedPlan:
    """Units in forward order, the root (the rest), and the two prefetch depths."""

    algorithm: str
    units: tuple[Unit, ...]
    forward_prefetch: int = 0
    backward_prefetch: int = 1
    knobs: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    keep_unsharded_between_microbatches: bool = False
    mixed_precision: CollectiveDtypes | None = None
    mesh: DeviceMeshShape | None = None
    """The data-parallel mesh (HSDP: replicate x shard); None: a 1-D mesh of every rank
    (written only when set, :mod:`gradsched.plan_mesh`)."""

    def to_dict(self) -> dict[str, Any]:
        keep = {"keep_unsharded_between_microbatches": True} \
            if self.keep_unsharded_between_microbatches else {}
        if self.mixed_precision is not None:
            keep["mixed_precision"] = self.mixed_precision.to_dict()
        if self.mesh is not None:
            keep["mesh"] = self.mesh.to_dict()
        return {"format": FORMAT, "format_version": FORMAT_VERSION,
                "algorithm": self.algorithm, "knobs": self.knobs, "info": self.info,
                "forward_prefetch": self.forward_prefetch,
                "backward_prefetch": self.backward_prefetch, **keep,
                "units": [u.to_dict() for u in self.units]}

    def save(self, path: str | Path) -> None:
        """Write the plan JSON atomically."""
        write_json_atomic(path, self.to_dict())

    @property
    def n_units(self) -> int:
        return len(self.units)

    def check_covers(self, names: Sequence[str], source: str | None = None) -> None:
        """Every unit tensor is a tensor of the trace, in exactly one unit."""
        known = set(names)
        seen: dict[str, int] = {}
        for index, unit in enumerate(self.units):
            if not unit.tensors:
                raise InputError(f"sharded plan '{self.algorithm}': unit {index} is empty",
                                 path=source, field="units")
            for name in unit.tensors:
                if name not in known:
                    raise InputError(f"sharded plan '{self.algorithm}': unit {index} names "
                                     f"tensor {name!r} that the trace does not have",
                                     path=source, field="tensors")
                if name in seen:
                    raise InputError(f"sharded plan '{self.algorithm}': tensor {name!r} is "
                                     f"in units {seen[name]} and {index}", path=source,
                                     field="tensors")
                seen[name] = index

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>") -> ShardedPlan:
        """Parse and check the JSON form."""
        if not isinstance(data, dict):
            raise InputError("a sharded plan must be a JSON object", path=source)
        if data.get("format") != FORMAT:
            raise InputError(f"not a sharded plan: format {data.get('format')!r}, expected "
                             f"{FORMAT!r}", path=source, field="format")
        if data.get("format_version") != FORMAT_VERSION:
            raise InputError(f"sharded plan format_version {data.get('format_version')!r} is "
                             f"not supported (this gradsched reads {FORMAT_VERSION})",
                             path=source, field="format_version")
        unknown = sorted(set(data) - PLAN_KEYS)
        if unknown:
            raise InputError(f"unknown key {unknown[0]!r}", path=source, field=unknown[0])
        units = data.get("units")
        if not isinstance(units, list) or not units:
            raise InputError("'units' must be a non-empty list (a plan of no units shards "
                             "nothing: every tensor in the root)", path=source, field="units")
        if len(units) > MAX_UNITS:
            raise InputError(f"{len(units)} units: at most {MAX_UNITS}", path=source,
                             field="units")
        return cls(algorithm=_text(data.get("algorithm", "custom"), source, "algorithm"),
                   units=tuple(_unit(u, i, source) for i, u in enumerate(units)),
                   forward_prefetch=_depth(data.get("forward_prefetch", 0), source,
                                           "forward_prefetch"),
                   backward_prefetch=_depth(data.get("backward_prefetch", 1), source,
                                            "backward_prefetch"),
                   knobs=_mapping(data.get("knobs", {}), source, "knobs"),
                   info=_mapping(data.get("info", {}), source, "info"),
                   keep_unsharded_between_microbatches=_flag(
                       data.get("keep_unsharded_between_microbatches", False), source,
                       "keep_unsharded_between_microbatches"),
                   mixed_precision=None if data.get("mixed_precision") is None else
                   CollectiveDtypes.from_dict(data["mixed_precision"], source),
                   mesh=None if data.get("mesh") is None
                   else DeviceMeshShape.from_dict(data["mesh"], source))

    @classmethod
    def load(cls, path: str | Path) -> ShardedPlan:
        """Read a sharded plan JSON file."""
        return cls.from_dict(read_json(path), source=str(path))


def _text(value: Any, source: str, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"'{name}' must be a non-empty string", path=source, field=name)
    return value


def _mapping(value: Any, source: str, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"'{name}' must be an object", path=source, field=name)
    return dict(value)


def _flag(value: Any, source: str, name: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"'{name}' must be true or false, got {value!r}", path=source,
                         field=name)
    return value


def _depth(value: Any, source: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PREFETCH:
        raise InputError(f"'{name}' must be an integer in 0..{MAX_PREFETCH}, got {value!r}",
                         path=source, field=name)
    return value


def _unit(raw: Any, index: int, source: str) -> Unit:
    where = f"units[{index}]"
    if not isinstance(raw, dict):
        raise InputError(f"{where} must be an object", path=source, field=where)
    unknown = sorted(set(raw) - UNIT_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}", path=source,
                         field=f"{where}.{unknown[0]}")
    tensors = raw.get("tensors")
    if not isinstance(tensors, list) or not all(isinstance(t, str) and t for t in tensors):
        raise InputError(f"{where}.tensors must be a list of tensor names", path=source,
                         field=f"{where}.tensors")
    reshard = raw.get("reshard_after_forward", True)
    if not isinstance(reshard, bool) and not (isinstance(reshard, int) and 2 <= reshard <= 2**20):
        raise InputError(f"{where}.reshard_after_forward must be true, false or the world "
                         "size (>= 2) to reshard to", path=source,
                         field=f"{where}.reshard_after_forward")
    return Unit(tensors=tuple(tensors), reshard_after_forward=reshard)


def tensors_under(all_tensors: Sequence[str]) -> dict[str, set[str]]:
    """Every module name (the dotted prefixes of the tensor names; ``""`` the model) -> the
    tensors under it: built once for all the units of a plan."""
    under: dict[str, set[str]] = {}
    for name in all_tensors:
        parts = name.split(".")
        for i in range(len(parts)):
            under.setdefault(".".join(parts[:i]), set()).add(name)
    return under


def covering_modules(unit_tensors: Sequence[str], all_tensors: Sequence[str],
                     under: dict[str, set[str]] | None = None) -> list[str]:
    """The fewest module names whose parameters are exactly ``unit_tensors`` (tensor names
    ``<module>.<param>``, modules from the dotted prefixes): a module is named instead of
    its children when every tensor under it is in the unit. In first-tensor order; ``""``
    is the model itself. ``under``: :func:`tensors_under` of ``all_tensors``, when the
    caller covers many units."""
    unit = set(unit_tensors)
    under = tensors_under(all_tensors) if under is None else under
    chosen: list[str] = []
    for name in unit_tensors:
        parts = name.split(".")
        first = 0 if len(parts) == 1 else 1  # the model itself only for its own tensors
        for i in range(first, len(parts)):
            prefix = ".".join(parts[:i])
            if under.get(prefix, {name}) <= unit:
                if prefix not in chosen and not any(
                        prefix.startswith(f"{c}.") for c in chosen if c):
                    chosen.append(prefix)
                break
        else:
            owner = ".".join(parts[:-1])
            raise InputError(f"module {owner!r} has parameters inside and outside the unit of "
                             f"{name!r}; FSDP2 shards whole modules", field="tensors")
    return chosen


def fully_shard_code(plan: ShardedPlan, names: Sequence[str]) -> str:
    """The FSDP2 calls that apply ``plan`` to ``model``, as a user pastes them: per unit the
    fewest modules covering it (:func:`covering_modules`, from the tensor names ``names``),
    ``fully_shard(model)`` for the root, then the prefetch lists (and, for a plan that keeps
    the parameters unsharded between micro-batches, the calls of each micro-batch as
    comments). A plan with a mesh starts with its ``init_device_mesh`` line."""
    lines = [plan.mesh.code()] if plan.mesh is not None else []
    under = tensors_under(names)
    mp, policy = plan.mixed_precision, ""
    if mp is not None:
        if mp.float8_all_gather:
            lines += ["# torchao, before fully_shard: convert_to_float8_training(model, config="
                      "Float8LinearConfig(enable_fsdp_float8_all_gather=True))"]
        lines.append(f"mp = {mp.policy_code()}")
        policy = ", mp_policy=mp"
    for k, unit in enumerate(plan.units):
        mods = covering_modules(unit.tensors, names, under)
        ref = ", ".join(f"model.get_submodule({m!r})" for m in mods)
        lines.append(f"u{k} = [{ref}]")
        mesh = ", mesh=mesh" if plan.mesh is not None else ""
        lines.append(f"fully_shard(u{k}, reshard_after_forward={unit.reshard_after_forward}"
                     f"{mesh}{policy})")
    lines.append(f"fully_shard(model{', mesh=mesh' if plan.mesh is not None else ''}{policy})")
    n = plan.n_units
    for k in range(n):
        ahead = [f"u{j}[0]" for j in range(k + 1, min(k + plan.forward_prefetch, n - 1) + 1)]
        if ahead:
            lines.append(f"u{k}[0].set_modules_to_forward_prefetch([{', '.join(ahead)}])")
        behind = [f"u{j}[0]" for j in range(k - 1, max(k - plan.backward_prefetch, 0) - 1, -1)]
        if behind:
            lines.append(f"u{k}[0].set_modules_to_backward_prefetch([{', '.join(behind)}])")
    if plan.keep_unsharded_between_microbatches:
        lines += ["# each micro-batch of a step but the last (gradient accumulation):",
                  "#   model.set_requires_gradient_sync(False)",
                  "#   model.set_reshard_after_backward(False)",
                  "# the last micro-batch: both set back to True before its forward"]
    return "\n".join(lines)
