"""Experiments: plan each case with each planner, replay it, collect a table.

Above the planners and the replay (the planners never import the replay; this layer
gives them the replay as their scorer). The common layer:

* :mod:`~gradsched.experiments.scoring` -- the replay as the planners' scorer, and
  :func:`make_plan` that supplies it;
* :mod:`~gradsched.experiments.grid` -- plan and replay algorithms on a grid of cases
  (:func:`compare` for one case, :func:`run_grid` for many), as pandas frames;
* :mod:`~gradsched.experiments.common` -- loading a case's compute trace.

The studies, one question per module, declare their cases, run them through the grid and
return frames that :mod:`gradsched.report` only formats; they import the common layer, not
each other:

* :mod:`~gradsched.experiments.ps` -- all-reduce against parameter servers;
* :mod:`~gradsched.experiments.topology` -- flat against hierarchical all-reduce on
  two-level clusters;
* :mod:`~gradsched.experiments.topology_check` -- a two-level topology identified from one
  multi-node sweep, checked against the others;
* :mod:`~gradsched.experiments.scaling` -- the replay against published multi-GPU scaling;
* :mod:`~gradsched.experiments.recommend` -- ``gradsched advise``: tuned DDP against the
  gradsched plan (its text: :mod:`~gradsched.experiments.recommend_text`);
* :mod:`~gradsched.experiments.compression` -- a plan replayed with and without gradient
  compression.
"""

from gradsched.experiments.grid import (
    RESULT_COLUMNS,
    GridCase,
    check_knobs_used,
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

__all__ = ["RESULT_COLUMNS", "GridCase", "ReplayCache", "check_knobs_used",
           "compare", "expand_algorithms", "knobs_for",
           "make_plan", "parse_knob_args", "plan_case", "replay_iteration_s",
           "resolve_world_size", "run_algorithm", "run_grid", "scoring_knobs"]
