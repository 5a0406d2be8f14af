"""One optimizer view per layer, built once, for the executor's per-layer updates.

A per-layer update (ByteScheduler: Peng et al., SOSP 2019; DeAR: Zhang, Shi et al., ICDCS
2023) steps the optimizer on one module's parameters just before that module's forward.
Calling the user's ``optimizer.step()`` with only that module's ``.grad`` set is exact but
walks every parameter of every group once per module (quadratic in the number of layers)
and needs the hyper-parameters swapped in and out around each call. Instead, each layer
gets a *view* of the optimizer, made once: an instance of the same class sharing the
optimizer's ``state`` (so momentum and Adam moments are the global step's), whose
``param_groups`` hold only the layer's parameters, one sub-group per original group with
that group's hyper-parameters. A view's ``step()`` runs the same update code (foreach or
fused kernels where the optimizer uses them) on the layer's parameters only, so the update
is element for element the one a global ``optimizer.step()`` gives them.

The hyper-parameters are those recorded when the iteration's update became due
(:meth:`LayerSteps.record`), so an LR scheduler stepped after it acts from the next
iteration. A view follows the optimizer's state and groups: a changed ``param_groups`` list
(``add_param_group``, ``load_state_dict``) rebuilds the views at the next :meth:`record`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def _view(optimizer: torch.optim.Optimizer, groups: list[dict[str, Any]]
          ) -> torch.optim.Optimizer:
    """An instance of ``optimizer``'s class sharing its attributes (state, defaults, hooks)
    with ``param_groups`` replaced. No constructor runs; an instance-level ``step`` (an LR
    scheduler's wrapper, bound to the original optimizer) is left out so that the class's
    step runs on the view."""
    view = object.__new__(type(optimizer))
    view.__dict__.update({k: v for k, v in optimizer.__dict__.items() if k != "step"})
    view.param_groups = groups
    return view


class LayerSteps:
    """The per-layer optimizer views of ``optimizer`` for ``layers`` (parameter lists)."""

    def __init__(self, optimizer: torch.optim.Optimizer, layers: list[list[nn.Parameter]]
                 ) -> None:
        self.optimizer = optimizer
        self.layers = layers
        self._hyper: list[dict[str, Any]] = []
        self._build()

    def _build(self) -> None:
        groups = self.optimizer.param_groups
        self._groups_key = (id(groups), len(groups))
        group_of: dict[nn.Parameter, int] = {}
        for gi, g in enumerate(groups):
            for p in g["params"]:
                group_of.setdefault(p, gi)
        self._views: list[torch.optim.Optimizer | None] = []
        self._group_index: list[list[int]] = []
        for params in self.layers:
            members: dict[int, list[nn.Parameter]] = {}
            for p in params:
                if p in group_of:  # a parameter the optimizer does not hold is not updated
                    members.setdefault(group_of[p], []).append(p)
            index = sorted(members)
            sub = [{**{k: v for k, v in groups[gi].items() if k != "params"},
                    "params": members[gi]} for gi in index]
            self._views.append(_view(self.optimizer, sub) if sub else None)
            self._group_index.append(index)

    def record(self) -> None:
        """Take the optimizer's current hyper-parameters for the updates now due."""
        groups = self.optimizer.param_groups
        if (id(groups), len(groups)) != self._groups_key:
            self._build()
        self._hyper = [{k: v for k, v in g.items() if k != "params"} for g in groups]

    def step(self, layer: int) -> None:
        """Update layer ``layer``'s parameters (their ``.grad`` set by the caller)."""
        view = self._views[layer]
        if view is None:
            return
        view.state = self.optimizer.state  # load_state_dict replaces the state object
        for g, gi in zip(view.param_groups, self._group_index[layer], strict=True):
            g.update(self._hyper[gi])
        view.step()
        if "step" in self.optimizer.__dict__:  # an LR scheduler tracks optimizer.step()
            self.optimizer._opt_called = True  # type: ignore[attr-defined]
