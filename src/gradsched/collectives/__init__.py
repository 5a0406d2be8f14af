"""Classic collective algorithms over ``torch.distributed`` point-to-point operations.

Implementations (all in place, sum reduction in the tensor's dtype, any world size,
any length; see :mod:`.common` for the shared rules):

============== ===================================================== =====================
collective     algorithms                                            reference
============== ===================================================== =====================
all_reduce     lp, ring, mst, rd, rhd, default                       Wang et al. 2017;
                                                                     Patarasuk & Yuan 2009;
                                                                     Thakur et al. 2005
broadcast      lp, mst, default                                      idem
reduce         lp, mst, default                                      idem
reduce_scatter ring, default                                         idem
all_gather     ring, default                                         idem
============== ===================================================== =====================

``default`` is the library's own collective (``dist.all_reduce`` etc.), kept as the
reference in benchmarks and tests. Names match
:data:`gradsched.costmodel.formulas.ALGORITHMS` and the comm-trace ``algorithm`` column.

Calling conventions (``group=None`` is the default group; ranks are group ranks):

* all_reduce: ``fn(tensor, group)``;
* broadcast / reduce: ``fn(tensor, root, group)``;
* reduce_scatter: ``fn(tensor, group)`` -- in place on the whole vector; block ``rank``
  of :func:`.common.block_bounds` (``P`` blocks) holds the result afterwards;
* all_gather: ``fn(tensor, group)`` -- in place; block ``i`` comes from rank ``i``.

Look-ups: :func:`get` (collective, name), :func:`get_allreduce` (the executor's hook),
:func:`algorithms` and :data:`COLLECTIVE_ALGORITHMS` (names, without importing torch),
:func:`registry` (every implementation). Benchmarks and exactness checks are in
:mod:`.bench`; formula fits and the ``tuned`` cost model in
:mod:`gradsched.costmodel.tuned`.

Verified (``tests/collectives/test_collectives.py``) with gloo for P = 2..5, fp32 and bf16, any
length; with NCCL the same code runs on GPU tensors (``dist.isend``/``irecv`` on CUDA)
but was not run here (no GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gradsched.errors import ConfigError

if TYPE_CHECKING:
    import torch

# torch is imported on first use only, so that the algorithm names (:func:`algorithms`,
# :data:`COLLECTIVE_ALGORITHMS`) stay cheap to look up.
AllReduceFn = Callable[["torch.Tensor", Any], None]


def _default_all_reduce(tensor: torch.Tensor, group: Any = None) -> None:
    import torch.distributed as dist

    dist.all_reduce(tensor, group=group)


def _default_broadcast(tensor: torch.Tensor, root: int = 0, group: Any = None) -> None:
    import torch.distributed as dist

    dist.broadcast(tensor, _global(root, group), group=group)


def _default_reduce(tensor: torch.Tensor, root: int = 0, group: Any = None) -> None:
    import torch.distributed as dist

    dist.reduce(tensor, _global(root, group), group=group)


def _default_reduce_scatter(tensor: torch.Tensor, group: Any = None) -> None:
    import torch
    import torch.distributed as dist

    from gradsched.collectives.common import block_bounds

    p, rank = dist.get_world_size(group), dist.get_rank(group)
    x = tensor.view(-1)
    bounds = block_bounds(x.numel(), p)
    inputs = [x[a:b].clone() for a, b in bounds]
    a, b = bounds[rank]
    if all(hi - lo == b - a for lo, hi in bounds):
        out = torch.empty_like(x[a:b])
        dist.reduce_scatter(out, inputs, group=group)
        x[a:b].copy_(out)
    else:  # uneven blocks: gloo's reduce_scatter needs equal sizes; reduce the whole
        whole = x.clone()
        dist.all_reduce(whole, group=group)
        x[a:b].copy_(whole[a:b])


def _default_all_gather(tensor: torch.Tensor, group: Any = None) -> None:
    import torch
    import torch.distributed as dist

    from gradsched.collectives.common import block_bounds

    p, rank = dist.get_world_size(group), dist.get_rank(group)
    x = tensor.view(-1)
    bounds = block_bounds(x.numel(), p)
    longest = max(b - a for a, b in bounds)
    a, b = bounds[rank]
    mine = torch.zeros(longest, dtype=x.dtype, device=x.device)
    mine[: b - a] = x[a:b]
    parts = [torch.empty_like(mine) for _ in range(p)]
    dist.all_gather(parts, mine, group=group)
    for (lo, hi), part in zip(bounds, parts, strict=True):
        x[lo:hi] = part[: hi - lo]


def _global(rank: int, group: Any) -> int:
    import torch.distributed as dist

    return rank if group is None else dist.get_global_rank(group, rank)


COLLECTIVE_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("default", "lp", "ring", "mst", "rd", "rhd"),
    "broadcast": ("default", "lp", "mst"),
    "reduce": ("default", "lp", "mst"),
    "reduce_scatter": ("default", "ring"),
    "all_gather": ("default", "ring"),
}
"""collective -> algorithm names (the keys of :func:`registry`)."""

_REGISTRY: dict[str, dict[str, Callable[..., Any]]] = {}


def registry() -> dict[str, dict[str, Callable[..., Any]]]:
    """collective -> algorithm name -> implementation (imports torch on first call)."""
    if not _REGISTRY:
        from gradsched.collectives import lp, mst, rd, rhd, ring

        _REGISTRY.update({
            "all_reduce": {"default": _default_all_reduce, "lp": lp.all_reduce,
                           "ring": ring.all_reduce, "mst": mst.all_reduce,
                           "rd": rd.all_reduce, "rhd": rhd.all_reduce},
            "broadcast": {"default": _default_broadcast, "lp": lp.broadcast,
                          "mst": mst.broadcast},
            "reduce": {"default": _default_reduce, "lp": lp.reduce, "mst": mst.reduce},
            "reduce_scatter": {"default": _default_reduce_scatter,
                               "ring": ring.reduce_scatter},
            "all_gather": {"default": _default_all_gather, "ring": ring.all_gather},
        })
    return _REGISTRY


def algorithms(collective: str) -> list[str]:
    """Algorithm names implemented for ``collective`` (``default`` first)."""
    if collective not in COLLECTIVE_ALGORITHMS:
        raise ConfigError(f"unknown collective {collective!r}; known: "
                          f"{', '.join(COLLECTIVE_ALGORITHMS)}")
    return list(COLLECTIVE_ALGORITHMS[collective])


def get(collective: str, name: str) -> Callable[..., Any]:
    """The implementation of ``collective`` by algorithm ``name``."""
    known = algorithms(collective)
    if name not in known:
        raise ConfigError(f"no {collective} algorithm {name!r}; known: {', '.join(known)}")
    return registry()[collective][name]


def get_allreduce(name: str) -> AllReduceFn:
    """``fn(tensor, group) -> None``: in-place sum all-reduce by algorithm ``name``
    (``default``, ``lp``, ``ring``, ``mst``, ``rd``, ``rhd``) -- the hook the plan
    executor uses to run a bucket with one of these algorithms."""
    fn = get("all_reduce", name)
    return lambda tensor, group=None: fn(tensor, group)


__all__ = ["COLLECTIVE_ALGORITHMS", "algorithms", "get", "get_allreduce", "registry"]
