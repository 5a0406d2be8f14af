"""The data-parallel device mesh of a sharded plan: HSDP's 2-D mesh and FSDP2's integer
``reshard_after_forward``.

PyTorch FSDP2 (torch 2.14.1, ``torch/distributed/fsdp/_fully_shard/``):

* ``fully_shard(module, mesh=mesh)`` with a 1-D mesh shards over all its ranks; with a 2-D
  mesh ``(replicate, shard)`` it shards over the second dimension and replicates over the
  first (``_fsdp_init.py`` L95-105: ``HSDPMeshInfo(mesh, shard_mesh_dim=1,
  replicate_mesh_dim=0)``). A parameter's shard is ``numel / shard`` elements.
* HSDP's gradient reduction: a reduce-scatter over the shard group, then an all-reduce of the
  reduce-scatter's output (the shard) over the replicate group (``_fsdp_collectives.py``
  L611-672, ``foreach_reduce``: ``reduce_scatter_comm(... group=reduce_scatter_group)``, then
  ``dist.all_reduce(reduce_output, group=all_reduce_group)`` on ``all_reduce_stream``;
  ``_fsdp_param_group.py`` L1041-1046: the all-reduce group is the mesh's
  ``replicate_process_group``). The all-reduce runs on its own stream, "concurrently with
  all-gather/reduce-scatter since collectives use different network resources"
  (``_fsdp_param_group.py`` L100-103).
* ``reshard_after_forward=g`` (an integer): after forward the parameters are resharded to
  ``g`` ranks instead of the whole shard group; ``g`` must divide the shard size, ``1`` is
  ``False`` and the shard size is ``True`` (``_fsdp_init.py`` L152-195,
  ``_get_post_forward_mesh_info``); the post-forward groups are the rows of
  ``mesh.view(-1, g)``: ``g`` consecutive ranks. The backward all-gather then runs over that
  group (``_fsdp_param_group.py`` L976-986, ``_all_gather_process_group``: the
  post-forward mesh's shard group while ``is_sharded_post_forward``), and each rank keeps a
  ``1/g`` slice of the unit from its forward until that all-gather
  (``_fsdp_param.py`` L926-975, ``to_sharded_post_forward`` / ``to_unsharded``). Not with
  an SPMD mesh (``_fully_shard.py`` L246-258).

Ranks are numbered node by node (as ``torchrun`` numbers them), so a shard group of at most
the GPUs of a node, consecutive ranks, lies inside one node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradsched.errors import ConfigError, InputError

Reshard = bool | int
"""``reshard_after_forward``: ``True``, ``False``, or the world size to reshard to."""


def check_reshard(value: Any, shard: int, where: str = "reshard_after_forward") -> Reshard:
    """A ``reshard_after_forward`` value for a shard group of ``shard`` ranks, normalised
    as FSDP2 normalises it (``_fsdp_init.py`` L162-182): an integer ``g`` must divide
    ``shard``; ``g = shard`` is ``True``; ``g = 1`` is ``False``."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, int) or not 1 <= value <= shard or shard % value:
        raise ConfigError(f"{where}: {value!r} must be true, false or an integer that divides "
                          f"the shard group's {shard} ranks (FSDP2's rule)")
    if value == shard:
        return True
    return False if value == 1 else value


def parse_reshard(text: Any) -> Reshard:
    """``true``, ``false`` or an integer >= 1 (a knob's or a JSON field's spelling)."""
    if isinstance(text, bool):
        return text
    if isinstance(text, int):
        value = text
    elif isinstance(text, str) and text.lower() in ("true", "false"):
        return text.lower() == "true"
    elif isinstance(text, str) and text.strip().isdigit():
        value = int(text.strip())
    else:
        raise ValueError(text)
    if value < 1:
        raise ValueError(text)
    return value


parse_reshard.__name__ = "true|false|int"


@dataclass(frozen=True)
class DeviceMeshShape:
    """A data-parallel mesh: ``replicate`` x ``shard`` ranks (``replicate = 1``: FSDP over
    a 1-D mesh of ``shard`` ranks)."""

    replicate: int
    shard: int

    def __post_init__(self) -> None:
        for name in ("replicate", "shard"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**20:
                raise ConfigError(f"mesh: {name} must be an integer in [1, 2**20], got "
                                  f"{value!r}")

    @property
    def world_size(self) -> int:
        return self.replicate * self.shard

    @property
    def is_hsdp(self) -> bool:
        return self.replicate > 1

    def label(self) -> str:
        return (f"HSDP {self.replicate} x {self.shard}" if self.is_hsdp
                else f"FSDP over {self.shard}")

    def to_dict(self) -> dict[str, int]:
        return {"replicate": self.replicate, "shard": self.shard}

    @classmethod
    def from_dict(cls, data: Any, source: str = "<mesh>") -> DeviceMeshShape:
        if not isinstance(data, dict) or set(data) != {"replicate", "shard"}:
            raise InputError("'mesh' must be an object {replicate, shard}", path=source,
                             field="mesh")
        try:
            return cls(data["replicate"], data["shard"])
        except ConfigError as exc:
            raise InputError(str(exc), path=source, field="mesh") from None

    def code(self, device: str = "cuda") -> str:
        """The ``init_device_mesh`` line a user pastes (``mesh`` is then passed to every
        ``fully_shard``)."""
        if not self.is_hsdp:
            return (f'mesh = init_device_mesh("{device}", ({self.shard},), '
                    'mesh_dim_names=("shard",))')
        return (f'mesh = init_device_mesh("{device}", ({self.replicate}, {self.shard}), '
                'mesh_dim_names=("replicate", "shard"))')
