"""``CollectiveDtypes``: the element types sharded data parallelism moves, one typed
setting carried by a :class:`~gradsched.plan_sharded.ShardedPlan`.

It follows FSDP2's ``MixedPrecisionPolicy(param_dtype, reduce_dtype)`` (torch 2.14,
``torch/distributed/fsdp/_fully_shard/_fsdp_api.py``) and what FSDP2 does with it
(``_fsdp_param.py`` ``init_dtype_attrs`` L801-815, ``_fsdp_collectives.py``
``foreach_reduce`` L552-615):

* ``param_dtype``: the parameters are cast to it before the all-gather, which moves
  ``numel x bytes(param_dtype)``; ``None`` (FSDP2's default): the parameters' own dtype,
  here the compute trace's element size (its ``bytes / numel``). Gradients are computed in
  it.
* ``reduce_dtype``: the gradients are cast to it into the reduce-scatter's input buffer
  (``reduce_scatter_input`` of ``dtype=reduce_dtype``), so the reduce-scatter (and, with a
  replicate dimension, the all-reduce) moves ``numel x bytes(reduce_dtype)``; ``None``:
  the gradients' dtype (``reduce_dtype = reduce_dtype or grad_dtype``, L560).
* ``float8_all_gather``: torchao's ``Float8LinearConfig(enable_fsdp_float8_all_gather=True)``
  after ``convert_to_float8_training``: the weights of the converted ``nn.Linear`` modules
  are cast to float8 before the all-gather (one byte per element,
  ``torchao/float8/fsdp_utils.py`` ``WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather``)
  and stay float8 for the matmul; their gradients are computed in ``param_dtype``. Other
  parameters (norms, embeddings, biases, the output head, which torchtitan's filter
  leaves unconverted) are all-gathered in ``param_dtype``. Which tensors are converted is
  decided by :func:`gradsched.replay.sharded_dtypes.is_float8_weight`.

Element names: ``fp32``, ``bf16``, ``fp16`` (two or four bytes); ``fp8`` only through
``float8_all_gather``. FSDP2 clamps a ``reduce_dtype`` equal to ``param_dtype`` to
``None``; the bytes are the same, so nothing here depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradsched.errors import ConfigError, InputError

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
"""Bytes per element of each dtype a policy may name."""
FLOAT8_BYTES = 1
TORCH_NAMES = {"fp32": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16"}
KEYS = frozenset({"param_dtype", "reduce_dtype", "float8_all_gather"})


@dataclass(frozen=True)
class CollectiveDtypes:
    """One mixed-precision policy (module docstring); checked when made."""

    param_dtype: str | None = None
    reduce_dtype: str | None = None
    float8_all_gather: bool = False

    def __post_init__(self) -> None:
        for name in ("param_dtype", "reduce_dtype"):
            value = getattr(self, name)
            if value is not None and value not in DTYPE_BYTES:
                raise ConfigError(f"{name} must be one of {', '.join(DTYPE_BYTES)}, got "
                                  f"{value!r} (float8 moves only the all-gather: "
                                  "float8_all_gather)")
        if not isinstance(self.float8_all_gather, bool):
            raise ConfigError(f"float8_all_gather must be true or false, got "
                              f"{self.float8_all_gather!r}")

    def gather_element(self, trace_element: float) -> float:
        """Bytes per element of a non-float8 all-gather (``param_dtype`` or the trace's)."""
        return float(DTYPE_BYTES[self.param_dtype]) if self.param_dtype else trace_element

    def reduce_element(self, trace_element: float) -> float:
        """Bytes per element of the reduce-scatter (``reduce_dtype``, else the gradients')."""
        return float(DTYPE_BYTES[self.reduce_dtype]) if self.reduce_dtype \
            else self.gather_element(trace_element)

    @property
    def label(self) -> str:
        """Short name: ``param/reduce`` (``-`` for the parameters' own), ``+fp8ag``."""
        text = f"{self.param_dtype or '-'}/{self.reduce_dtype or '-'}"
        return text + ("+fp8ag" if self.float8_all_gather else "")

    def policy_code(self) -> str:
        """The ``MixedPrecisionPolicy(...)`` a user passes as ``mp_policy``."""
        args = [f"{k}={TORCH_NAMES[v]}" for k, v in (("param_dtype", self.param_dtype),
                                                     ("reduce_dtype", self.reduce_dtype)) if v]
        return f"MixedPrecisionPolicy({', '.join(args)})"

    def to_dict(self) -> dict[str, Any]:
        return {"param_dtype": self.param_dtype, "reduce_dtype": self.reduce_dtype,
                "float8_all_gather": self.float8_all_gather}

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>",
                  field: str = "mixed_precision") -> CollectiveDtypes:
        """Parse the JSON form; an error names ``source`` and the field."""
        if not isinstance(data, dict):
            raise InputError(f"'{field}' must be an object", path=source, field=field)
        unknown = sorted(set(data) - KEYS)
        if unknown:
            raise InputError(f"{field}: unknown key {unknown[0]!r}", path=source,
                             field=f"{field}.{unknown[0]}")
        try:
            return cls(param_dtype=data.get("param_dtype"),
                       reduce_dtype=data.get("reduce_dtype"),
                       float8_all_gather=data.get("float8_all_gather", False))
        except ConfigError as exc:
            raise InputError(str(exc), path=source, field=field) from None


def parse_dtypes(param_dtype: str | None, reduce_dtype: str | None,
                 float8_all_gather: bool) -> CollectiveDtypes | None:
    """The policy the options describe, ``None`` when they describe FSDP2's default (no
    option given: every collective in the trace's bytes)."""
    if param_dtype is None and reduce_dtype is None and not float8_all_gather:
        return None
    return CollectiveDtypes(param_dtype, reduce_dtype, float8_all_gather)
