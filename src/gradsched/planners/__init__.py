"""Planners: one module per scheduling/merging algorithm, and their registry.

Every planner is ``plan(trace, model, world_size, **knobs) -> Plan``, in a module that
defines ``NAME``, ``SUMMARY``, ``KNOBS`` and ``plan`` (and ``SCORED = True`` if it scores
candidate plans). The registry is the three module tuples below, and nothing else:
:data:`ALL_PLANNERS` (the planners of "all", ``best`` last: ``best`` runs every other one of
them, by name), :data:`PS_PLANNERS` and :data:`EXTRA_PLANNERS`. Adding a planner is one file
and one entry in one tuple (README, "Extending -> An algorithm"); :func:`check_registry`
names what a module lacks. :data:`PLANNERS` maps each name to its function and knob
specification; :func:`make_plan` parses knob values given as strings (command line,
workflow config) and rejects unknown or bad knobs with a
:class:`~gradsched.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.limits import MAX_KNOB_MAGNITUDE
from gradsched.plan import Plan
from gradsched.planners import (
    best,
    bsp_ps,
    bytescheduler,
    bytescheduler_ps,
    contiguous,
    ddp,
    ddp_list,
    dear,
    deepspeed_zero,
    horovod,
    megatron,
    mgwfbp,
    oasr,
    search,
    syncsgd,
    wfbp,
    wfbp_ps,
    zero1_torch,
)
from gradsched.planners._family import Knob, Scorer, ScorerFactory
from gradsched.traces.bundle import ComputeTrace
from gradsched.units import parse_real

PlannerFunc = Callable[..., Plan]

# The registry. "all": baselines first, then the searches; ``best`` last (it runs all the
# others). A new planner goes into ALL_PLANNERS just before ``best``.
ALL_PLANNERS: tuple[ModuleType, ...] = (
    wfbp, syncsgd, ddp, horovod, mgwfbp, oasr, bytescheduler, dear, contiguous, search, best,
)
# Planners for a parameter server only (costmodel/ps.py; they refuse other models), not in
# "all": every planner above also prices a PS plan through the PS model's collectives.
PS_PLANNERS: tuple[ModuleType, ...] = (bsp_ps, wfbp_ps, bytescheduler_ps)
# Planners usable by name (plan, replay, the workflow's algorithm lists) but not in "all":
# ``ddp-list`` plans the contiguous optimum's buckets again, as DDP caps (adding it to "all"
# would add a row to every replay without a new schedule); the sharded-optimizer
# frameworks (Megatron-LM's grad buffer, DeepSpeed ZeRO-1/2, torch's ZeRO-1) step 1/P of
# the parameters, a different optimizer from the one every planner of "all" (and the
# ``search`` that bounds them) assumes.
EXTRA_PLANNERS: tuple[ModuleType, ...] = (ddp_list, megatron, deepspeed_zero, zero1_torch)

ALGORITHMS_ALL: tuple[str, ...] = tuple(m.NAME for m in ALL_PLANNERS)
PS_ALGORITHMS: tuple[str, ...] = tuple(m.NAME for m in PS_PLANNERS)
EXTRA_ALGORITHMS: tuple[str, ...] = tuple(m.NAME for m in EXTRA_PLANNERS)
# Planners whose plans are contiguous all-reduce groupings with a global update.
WFBP_FAMILY: tuple[str, ...] = ("wfbp", "syncsgd", "ddp", "mgwfbp", "oasr",
                                 "contiguous_optimum", "ddp-list")


@dataclass(frozen=True)
class PlannerSpec:
    """A planner: its function, a one-line summary and its knobs; ``scored``: it searches
    by scoring candidate plans and takes a ``scorer`` (a :class:`ScorerFactory`)."""

    name: str
    func: PlannerFunc
    summary: str
    knobs: tuple[Knob, ...]
    scored: bool = False

    @property
    def defaults(self) -> dict[str, Any]:
        return {k.name: k.default for k in self.knobs}

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        valid = ", ".join(k.name for k in self.knobs) or "(none)"
        raise ConfigError(f"planner {self.name!r} has no knob {name!r}; valid knobs: {valid}")

    def help(self) -> str:
        """Multi-line description of the knobs."""
        lines = [f"{self.name}: {self.summary}"]
        for k in self.knobs:
            choices = f" one of {'|'.join(k.choices)};" if k.choices else ""
            lines.append(f"  {k.name} ({kind_name(k.kind)},{choices} default {k.default}): "
                         f"{k.help}")
        return "\n".join(lines)


REQUIRED = {"NAME": str, "SUMMARY": str, "KNOBS": tuple}
"""What every planner module defines (besides a callable ``plan``)."""


def check_registry(groups: Mapping[str, tuple[ModuleType, ...]], best_name: str) -> None:
    """Check the registry's module tuples, naming the module and what it lacks if not.

    ``groups``: tuple name -> planner modules (:data:`ALL_PLANNERS`, :data:`PS_PLANNERS`,
    :data:`EXTRA_PLANNERS`). Every module defines ``NAME`` (a string), ``SUMMARY``,
    ``KNOBS`` (a tuple of :class:`Knob`) and a callable ``plan``; no name appears twice; in
    ``ALL_PLANNERS``, ``best_name`` comes last (it runs the others, README "Extending -> An
    algorithm")."""
    here = "src/gradsched/planners/__init__.py"
    seen: dict[str, str] = {}
    for group, modules in groups.items():
        for module in modules:
            where = f"planner module {module.__name__}"
            for attr, kind in REQUIRED.items():
                if not isinstance(getattr(module, attr, None), kind):
                    raise ConfigError(f"planner registry: {where} has no {attr} "
                                      f"(a {kind.__name__}); define it there")
            if not callable(getattr(module, "plan", None)):
                raise ConfigError(f"planner registry: {where} has no plan(trace, model, "
                                  f"world_size, **knobs) function; define it there")
            _check_knobs_type(module, where)
            if module.NAME in seen:
                raise ConfigError(f"planner registry: the name {module.NAME!r} of {where} is "
                                  f"already taken by {seen[module.NAME]}; rename one")
            seen[module.NAME] = f"planner module {module.__name__} (in {group})"
    names = [m.NAME for m in groups.get("ALL_PLANNERS", ())]
    if names and names[-1] != best_name:
        raise ConfigError(f"planner registry: {best_name!r} must be the last of ALL_PLANNERS "
                          f"in {here} (it runs the others); put new planners before it")


def _check_knobs_type(module: ModuleType, where: str) -> None:
    """A module's ``Knobs`` dataclass (optional) has exactly its ``KNOBS``' names and
    defaults, in their order: the registry builds it from the knobs :data:`KNOBS` parses."""
    knobs_type = getattr(module, "Knobs", None)
    if knobs_type is None:
        return
    fields = ([(f.name, f.default) for f in dataclasses.fields(knobs_type)]
              if dataclasses.is_dataclass(knobs_type) else None)
    if fields != [(k.name, k.default) for k in module.KNOBS]:
        raise ConfigError(f"planner registry: {where}'s Knobs dataclass does not match its "
                          "KNOBS (the same names, defaults and order); make them agree")


check_registry({"ALL_PLANNERS": ALL_PLANNERS, "PS_PLANNERS": PS_PLANNERS,
                "EXTRA_PLANNERS": EXTRA_PLANNERS}, best.NAME)


def _with_knobs(module: ModuleType, plan: PlannerFunc) -> PlannerFunc:
    """``plan`` as the registry calls it, ``(trace, model, world_size, **knobs)``: a module
    that defines a frozen ``Knobs`` dataclass gets its knobs as one ``Knobs`` object, built
    (and checked) here, once."""
    knobs_type = getattr(module, "Knobs", None)
    if knobs_type is None:
        return plan

    @functools.wraps(module.plan)
    def call(trace: ComputeTrace, model: CommModel, world_size: int, *,
             scorer: ScorerFactory | None = None, **knobs: Any) -> Plan:
        return plan(trace, model, world_size, knobs_type(**knobs), scorer=scorer)

    return call


def _rival(module: ModuleType) -> best.Rival:
    return best.Rival(_with_knobs(module, module.plan), bool(getattr(module, "SCORED", False)))


RIVALS: dict[str, best.Rival] = {m.NAME: _rival(m) for m in ALL_PLANNERS if m is not best}
"""The planners ``best`` runs: every planner of "all" but itself, in its order."""


def _spec(module: ModuleType) -> PlannerSpec:
    func = _with_knobs(module, partial(best.plan, rivals=RIVALS) if module is best
                       else module.plan)
    return PlannerSpec(module.NAME, func, module.SUMMARY, module.KNOBS,
                       bool(getattr(module, "SCORED", False)))


PLANNERS: dict[str, PlannerSpec] = {
    m.NAME: _spec(m) for m in (*ALL_PLANNERS, *PS_PLANNERS, *EXTRA_PLANNERS)
}


def planner_module(name: str) -> str:
    """The module that defines planner ``name`` (its docstring cites its source)."""
    func = get_planner(name).func
    return getattr(func, "func", func).__module__


def planner_names() -> list[str]:
    """Registered planner names: those of "all", the parameter-server ones, then the
    extra ones (:data:`EXTRA_ALGORITHMS`)."""
    return list(PLANNERS)


def get_planner(name: str) -> PlannerSpec:
    """The spec of ``name``; an unknown name lists the valid ones."""
    if name not in PLANNERS:
        raise ConfigError(f"unknown planner {name!r}; known: {', '.join(PLANNERS)}")
    return PLANNERS[name]


# Replay settings a planner may take as knobs to score its candidates with (``best``).
REPLAY_KNOBS = ("collective_cpu_s", "compute_slowdown", "comm_slowdown", "issue")


def replay_knobs(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Of ``settings`` (replay interference and issue order, see :data:`REPLAY_KNOBS`),
    those that planner ``name`` takes as knobs: how callers that replay with them let the
    planner score with the same model."""
    own = {k.name for k in get_planner(name).knobs}
    return {k: v for k, v in settings.items() if k in REPLAY_KNOBS and k in own}


KNOB_MAGNITUDE = MAX_KNOB_MAGNITUDE
"""Largest magnitude of a numeric knob (MB, bytes, parameters, seconds or counts)."""
MAX_SEARCH_ITERS = 10_000
"""Largest search or replay budget (knobs named ``*_iters`` or ``*_iterations``)."""

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_knob(planner: str, knob: Knob, value: Any) -> Any:
    """Convert ``value`` (a string or a number) to the knob's type, checking choices."""
    where = f"planner {planner!r} knob {knob.name}"
    if knob.default is None and (value is None or
                                 (isinstance(value, str) and value.lower() in ("", "none"))):
        return None
    try:
        if knob.kind is bool:
            out: Any = _parse_bool(value)
        elif knob.kind is int:
            out = _parse_int(value)
        elif knob.kind is float:
            out = _parse_float(value)
        elif knob.kind is tuple:
            out = _parse_floats(value)
        else:
            out = str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {value!r} is not a valid {kind_name(knob.kind)}") from None
    if knob.choices is not None and out not in knob.choices:
        raise ConfigError(f"{where}: {out!r} is not one of {', '.join(knob.choices)}")
    if ((knob.kind is float and not _finite(out))
            or (knob.kind is tuple and not all(_finite(v) for v in out))
            or (knob.kind is int and abs(out) > KNOB_MAGNITUDE)):
        # 1e300 MB buckets would pass and overflow the planners' byte sums
        raise ConfigError(f"{where}: {value!r} is not a finite number of magnitude "
                          f"<= {KNOB_MAGNITUDE:g}")
    if knob.kind is int and knob.name.endswith(("_iters", "_iterations")) \
            and not 1 <= out <= MAX_SEARCH_ITERS:
        # bo_iters=1e9 would search for ever: search and replay budgets are bounded
        raise ConfigError(f"{where}: {out} is out of range [1, {MAX_SEARCH_ITERS}]")
    return out


def kind_name(kind: type) -> str:
    """How a knob's type is named in help and errors (a ``tuple`` knob is a list of
    numbers)."""
    return "list of float" if kind is tuple else kind.__name__


def _finite(value: float) -> bool:
    return math.isfinite(value) and abs(value) <= KNOB_MAGNITUDE


def _parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(value)
    return parse_real(value) if isinstance(value, str) else float(value)


def _parse_floats(value: Any) -> tuple[float, ...]:
    """A list knob (``tuple`` kind): ``"1.0,27,16"`` (brackets allowed: a YAML list in the
    workflow config reaches the CLI as ``[1.0, 27, 16]``) or a sequence of numbers ->
    floats; an empty list is refused."""
    if isinstance(value, str):
        items: list[Any] = value.strip().removeprefix("[").removesuffix("]").split(",")
    elif isinstance(value, (int, float)):
        items = [value]
    else:
        items = list(value)
    out = tuple(_parse_float(v.strip() if isinstance(v, str) else v) for v in items)
    if not out:
        raise ValueError(value)
    return out


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(value)


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value
    number = parse_real(value) if isinstance(value, str) else float(value)
    if not number.is_integer():
        raise ValueError(value)
    return int(number)


def parse_knobs(name: str, knobs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate and convert ``knobs`` for planner ``name`` (unknown knob -> ConfigError)."""
    spec = get_planner(name)
    return {key: parse_knob(name, spec.knob(key), value) for key, value in (knobs or {}).items()}


def make_plan(name: str, trace: ComputeTrace, model: CommModel, world_size: int,
              knobs: Mapping[str, str | float | int] | None = None,
              scorer: ScorerFactory | None = None) -> Plan:
    """Run planner ``name`` with ``knobs`` (strings are parsed to the knob types).

    A scored planner (``spec.scored``) that has to score candidates needs ``scorer``;
    :func:`gradsched.experiments.make_plan` passes the replay's."""
    if world_size < 1:
        raise ConfigError(f"world_size must be >= 1, got {world_size}")
    spec = get_planner(name)
    own = {"scorer": scorer} if spec.scored else {}
    return spec.func(trace, model, world_size, **parse_knobs(name, knobs), **own)


__all__ = ["ALGORITHMS_ALL", "ALL_PLANNERS", "EXTRA_ALGORITHMS", "EXTRA_PLANNERS", "PLANNERS",
           "PS_ALGORITHMS", "PS_PLANNERS", "RIVALS", "WFBP_FAMILY", "Knob", "PlannerSpec",
           "Scorer", "ScorerFactory", "check_registry", "get_planner", "make_plan",
           "parse_knobs", "planner_module", "planner_names", "replay_knobs"]
