"""The planner registry's consistency check (README, "Extending -> An algorithm"): the three
module tuples are the registry; a module that lacks a piece, a name used twice or ``best``
not last fails with a message naming the module and the fix, not a bare ``AssertionError``;
``best`` runs every other planner of "all", by name, with no list of its own to keep."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import pytest

from gradsched.errors import ConfigError
from gradsched.planners import (
    ALGORITHMS_ALL,
    ALL_PLANNERS,
    EXTRA_ALGORITHMS,
    EXTRA_PLANNERS,
    PLANNERS,
    PS_ALGORITHMS,
    PS_PLANNERS,
    RIVALS,
    check_registry,
)
from gradsched.planners import dear as dear_module
from gradsched.planners import wfbp as wfbp_module


def _groups(all_planners: tuple[ModuleType, ...] = ALL_PLANNERS) -> dict:
    return {"ALL_PLANNERS": all_planners, "PS_PLANNERS": PS_PLANNERS,
            "EXTRA_PLANNERS": EXTRA_PLANNERS}


def _module(name: str = "newplan", **attrs) -> ModuleType:
    """A SYNTHETIC planner module (not shipped): what README's step one writes."""
    module = ModuleType(f"gradsched.planners.{name}")
    defaults = {"NAME": name, "SUMMARY": "a test planner", "KNOBS": (),
                "plan": wfbp_module.plan}
    for key, value in {**defaults, **attrs}.items():
        if value is not None:
            setattr(module, key, value)
    return module


def _before_best(module: ModuleType) -> tuple[ModuleType, ...]:
    return (*ALL_PLANNERS[:-1], module, ALL_PLANNERS[-1])


def test_the_shipped_registry_is_consistent():
    check_registry(_groups(), "best")
    assert list(PLANNERS) == [*ALGORITHMS_ALL, *PS_ALGORITHMS, *EXTRA_ALGORITHMS]
    assert ALGORITHMS_ALL[-1] == "best"
    assert list(RIVALS) == list(ALGORITHMS_ALL[:-1])


def test_a_new_module_before_best_passes():
    check_registry(_groups(_before_best(_module())), "best")


@pytest.mark.parametrize("missing", ["NAME", "SUMMARY", "KNOBS"])
def test_a_module_missing_a_constant_names_it(missing: str):
    groups = _groups(_before_best(_module(**{missing: None})))
    with pytest.raises(ConfigError, match=rf"gradsched\.planners\.newplan has no {missing}"):
        check_registry(groups, "best")


def test_a_module_without_plan_names_it():
    groups = _groups(_before_best(_module(plan=None)))
    with pytest.raises(ConfigError, match=r"newplan has no plan\(trace, model"):
        check_registry(groups, "best")


def test_a_name_used_twice_is_named():
    groups = _groups(_before_best(_module("newplan", NAME="wfbp")))
    with pytest.raises(ConfigError, match=r"the name 'wfbp' .* is already taken"):
        check_registry(groups, "best")


def test_best_not_last_is_named():
    groups = _groups((*ALL_PLANNERS, _module()))
    with pytest.raises(ConfigError, match="'best' must be the last of ALL_PLANNERS"):
        check_registry(groups, "best")


def test_a_knobs_dataclass_that_disagrees_with_knobs_is_named():
    @dataclass(frozen=True)
    class Knobs:  # dear's knobs with one default changed (SYNTHETIC)
        threshold_mb: float = 50.0
        search: str = "bo"
        bo_iters: int = 10
        ag_issue: str = "lookahead"
        replay_iterations: int = 5

    agrees = _module(KNOBS=dear_module.KNOBS, Knobs=dear_module.Knobs, plan=dear_module.plan)
    check_registry(_groups(_before_best(agrees)), "best")
    groups = _groups(_before_best(_module(KNOBS=dear_module.KNOBS, Knobs=Knobs,
                                          plan=dear_module.plan)))
    with pytest.raises(ConfigError, match=r"newplan's Knobs dataclass does not match"):
        check_registry(groups, "best")


def test_the_registry_builds_a_planners_knobs_once():
    from gradsched.planners import get_planner

    func = get_planner("dear").func
    assert func.__module__ == "gradsched.planners.dear"
    with pytest.raises(ConfigError, match="bo_iters must be >= 1"):
        dear_module.Knobs(bo_iters=0)
