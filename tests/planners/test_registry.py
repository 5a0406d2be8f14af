"""The planner registry's consistency check (README, "Extending -> An algorithm"): a planner
registered without being added to ``best.RIVALS`` (or to ``ALGORITHMS_ALL``) fails with a
message naming the list to add it to, not a bare ``AssertionError``."""

from __future__ import annotations

import pytest

from gradsched.errors import ConfigError
from gradsched.planners import (
    ALGORITHMS_ALL,
    EXTRA_ALGORITHMS,
    PLANNERS,
    PS_ALGORITHMS,
    check_registry,
)
from gradsched.planners import best as best_module

RIVALS = tuple(m.NAME for m in best_module.RIVALS)
LISTED = ALGORITHMS_ALL + PS_ALGORITHMS + EXTRA_ALGORITHMS


def _with_new(names: tuple[str, ...], new: str = "newplan") -> tuple[str, ...]:
    """``names`` with ``new`` inserted before ``best`` (where the README says it goes)."""
    at = names.index("best")
    return (*names[:at], new, *names[at:])


def test_the_shipped_registry_is_consistent():
    check_registry(tuple(PLANNERS), LISTED, ALGORITHMS_ALL, RIVALS, "best")


def test_a_planner_missing_from_rivals_names_best_rivals():
    registered, all_names = _with_new(tuple(PLANNERS)), _with_new(ALGORITHMS_ALL)
    listed = all_names + PS_ALGORITHMS + EXTRA_ALGORITHMS
    with pytest.raises(ConfigError, match=r"newplan .*missing from RIVALS in "
                                          r"src/gradsched/planners/best\.py"):
        check_registry(registered, listed, all_names, RIVALS, "best")


def test_a_planner_missing_from_algorithms_all_names_it():
    registered = _with_new(tuple(PLANNERS))
    with pytest.raises(ConfigError, match=r"newplan in the module tuple of PLANNERS but not "
                                          r"listed in ALGORITHMS_ALL"):
        check_registry(registered, LISTED, ALGORITHMS_ALL, RIVALS, "best")


def test_a_different_order_is_named():
    rivals = (RIVALS[1], RIVALS[0], *RIVALS[2:])
    with pytest.raises(ConfigError, match="must list the planners in the order"):
        check_registry(tuple(PLANNERS), LISTED, ALGORITHMS_ALL, rivals, "best")
