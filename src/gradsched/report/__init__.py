"""Report stage: figures (seaborn, PDF + PNG), tables (booktabs LaTeX + Markdown), prose macros.

Everything here reads the pipeline's result CSVs and writes files atomically; nothing here
plans, fits or replays. ``gradsched report ...`` (see :mod:`gradsched.commands.report`) is
the command-line face used by the Snakemake rules.

* :mod:`~gradsched.report.collect` -- concatenate per-case replay results.
* :mod:`~gradsched.report.figures` -- one function per figure.
* :mod:`~gradsched.report.tables` -- one function per table.
* :mod:`~gradsched.report.formatting` -- numbers as table text (:func:`~.formatting.fmt`).
* :mod:`~gradsched.report.macros` -- ``\\newcommand`` s for every number quoted in prose.
* :mod:`~gradsched.report.compare` -- reproduced vs published numbers with tolerances.
"""

from gradsched.report.collect import Case, collect_cases

__all__ = ["Case", "collect_cases"]
