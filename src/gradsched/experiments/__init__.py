"""Experiments: plan each case with each planner, replay it, collect a table.

Above the planners and the replay (the planners never import the replay; this layer
gives them the replay as their scorer, :mod:`gradsched.experiments.scoring`).
:mod:`gradsched.experiments.grid` runs one case's planners; the studies (one question
per module) run their grids of cases through it and return pandas frames that
:mod:`gradsched.report` only formats.
"""

from gradsched.experiments.grid import (
    RESULT_COLUMNS,
    GridCase,
    compare,
    expand_algorithms,
    knobs_for,
    parse_knob_args,
    plan_case,
    resolve_world_size,
    run_algorithm,
    run_grid,
    scoring_knobs,
)
from gradsched.experiments.scoring import ReplayCache, make_plan, replay_iteration_s

__all__ = ["RESULT_COLUMNS", "GridCase", "ReplayCache", "compare", "expand_algorithms", "knobs_for",
           "make_plan", "parse_knob_args", "plan_case", "replay_iteration_s",
           "resolve_world_size", "run_algorithm", "run_grid", "scoring_knobs"]
