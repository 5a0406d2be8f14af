"""Sharded data parallelism's solvers: the exact optimum of unit grouping, resharding and
prefetch depth under a memory cap, and the comparison of every sharded planner on one case.

One problem (:class:`gradsched.experiments.sharded.common.ShardedProblem`: trace, model,
world size and the search's settings, the trace's layers and blocks derived once) is made by
the caller and taken whole by every solver:

* :mod:`~gradsched.experiments.sharded.optimum`: ``optimum``, ``exhaustive_optimum``,
  ``compare`` (which method covers which setting, and why);
* :mod:`~gradsched.experiments.sharded.blocking`: the dynamic program of blocking semantics;
* :mod:`~gradsched.experiments.sharded.streams`: streams semantics without enumerating,
  by :mod:`~gradsched.experiments.sharded.program` (units resharded),
  :mod:`~gradsched.experiments.sharded.kept` (units kept gathered) and
  :mod:`~gradsched.experiments.sharded.search`;
* :mod:`~gradsched.experiments.sharded.candidates`: scoring one grouping under one setting;
* :mod:`~gradsched.experiments.sharded.memory`: what a layout may gather on one GPU;
* :mod:`~gradsched.experiments.sharded.common`: the problem and the shared pieces (the
  error when nothing fits, collective seconds and bytes per run of blocks).

Ties between candidates follow :func:`gradsched.ties.better`.
"""
