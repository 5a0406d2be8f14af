r"""Report stage: figures (seaborn, PDF + PNG), tables (booktabs LaTeX + Markdown), prose macros.

Everything here formats the frames it is given or reads from the pipeline's result CSVs and
writes files atomically; nothing here plans, fits, replays, runs an experiment or analyses a
re-execution (``tests/test_layering.py``). ``gradsched report ...`` (see
:mod:`gradsched.commands.report`) is the command-line face used by the Snakemake rules;
``gradsched study ...`` runs the studies whose CSVs it formats.

One module per study, each with its tables, figures and macros: :mod:`.fits` (cost-model
fits), :mod:`.replay` (the replay of every planner; one world size: :mod:`.figure_relative`;
the claims' domain: :mod:`.domain_macros`), :mod:`.timeline`, :mod:`.headline` (the headline
under each model kind), :mod:`.calibrated`, :mod:`.gpu_generations`, :mod:`.captures` (the
traces captured here), :mod:`.trace_facts`, :mod:`.burst`, :mod:`.compare` (against published
numbers), :mod:`.topology`, :mod:`.scaling`, :mod:`.ps_replay`, :mod:`.architectures`,
:mod:`.sharded`, :mod:`.forward`, :mod:`.collectives`, :mod:`.compression`, the
re-execution's :mod:`.reexec`, :mod:`.stock_ddp` and :mod:`.tuned_caps` (their case labels:
:mod:`.reexec_cases`).

Shared: :mod:`.latex` (escaping, tables as LaTeX and Markdown, ``\newcommand`` files),
:mod:`.algorithms` (the planners' labels and order, tied fastest schedules),
:mod:`.formatting` (numbers as table text), :mod:`.figure_style` (what every figure shares),
:mod:`.collect` (replay results into one frame, and its row masks), :mod:`.tables` (the
``report table NAME`` registry), :mod:`.paper_macros` (every study's macros in one file) and
the paper's build (:mod:`.captions`, :mod:`.claims`, :mod:`.latexlog`).
"""

from gradsched.report.collect import Case, collect_cases

__all__ = ["Case", "collect_cases"]
