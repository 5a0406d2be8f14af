"""The settings of the at-scale study, one frozen object built and checked where the
command parses its arguments: which comm model prices each GPU type's collectives, and
which effects of scale are switched on.

Every effect is a switch, so a reader sees what each adds (the study's rows carry them):

* ``comm``: the comm model per GPU type (a ``--comm`` spec: a sweep CSV, a fitted model
  JSON, or inline alpha-beta), with the label the tables print;
* ``overlap_slowdown``: compute slowed while communication kernels run beside it
  (:func:`gradsched.experiments.at_scale.hooks.compute_slowdown`);
* ``stragglers``: every collective waits for the slowest of P ranks
  (:func:`gradsched.experiments.at_scale.hooks.straggler_transform`);
* ``unit_jitter``: the per-unit synchronisations wait for the slowest rank where the
  measured independent per-unit jitter exceeds the unit's slack
  (:mod:`gradsched.experiments.at_scale.sync`); ``None`` = off.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.errors import ConfigError
from gradsched.experiments.at_scale.unit_jitter import UnitJitter
from gradsched.gpus import GPU_PEAK_FLOPS

GROWTH_FLOOR = 0.01
"""Smallest published growth of the time per token (fraction) for which the share of it a
prediction explains is defined (below it, the ratio divides by noise)."""


@dataclass(frozen=True)
class CommChoice:
    """The comm model of one GPU type: ``spec`` as ``--comm`` takes it, ``label`` for tables,
    ``proxy`` true when the model was measured on another cluster than the points'."""

    gpu: str
    spec: str
    label: str
    proxy: bool = True


@dataclass(frozen=True)
class AtScaleSettings:
    """One variant of the study (module docstring); ``name`` labels its rows."""

    comm: tuple[CommChoice, ...]
    name: str = "before"
    overlap_slowdown: bool = False
    stragglers: bool = False
    unit_jitter: UnitJitter | None = None
    growth_floor: float = GROWTH_FLOOR

    def __post_init__(self) -> None:
        gpus = [c.gpu for c in self.comm]
        unknown = sorted(set(gpus) - set(GPU_PEAK_FLOPS))
        if unknown:
            raise ConfigError(f"--comm {unknown[0]}=...: unknown GPU; use one of "
                              f"{', '.join(sorted(GPU_PEAK_FLOPS))}")
        if len(set(gpus)) != len(gpus):
            raise ConfigError("--comm: two models for one GPU type")
        if not self.name.strip() or "," in self.name:
            raise ConfigError(f"--variant must be a non-empty name without commas, got "
                              f"{self.name!r}")
        if not 0 < self.growth_floor < 1:
            raise ConfigError(f"growth floor must be in (0, 1), got {self.growth_floor}")

    def choice(self, gpu: str) -> CommChoice:
        """The comm model of ``gpu``, or a ConfigError naming the missing ``--comm``."""
        for c in self.comm:
            if c.gpu == gpu:
                return c
        raise ConfigError(f"no --comm {gpu}=MODEL: the points include {gpu} GPUs")

    def effects(self) -> dict[str, str]:
        """The switches as the rows print them."""
        return {"variant": self.name,
                "overlap_slowdown": "on" if self.overlap_slowdown else "off",
                "stragglers": "on" if self.stragglers else "off",
                "unit_stragglers": "off" if self.unit_jitter is None else "on"}
