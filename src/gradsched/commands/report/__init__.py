"""``gradsched report ...``: figures, tables, prose macros and checks from result CSVs.

    gradsched report collect --case TRACE NETWORK COMM.csv RESULT.csv [...] \\
        [--extrapolated TRACE NETWORK REF.csv RESULT.csv ...] \\
        [--label TRACE NETWORK FAMILY PAIRING ...] -o replay.csv
    gradsched report concat A.csv B.csv ... -o all.csv
    gradsched report figure fit-curves --comm A.csv ... --models A.piecewise.json ... \\
        --fits fits.csv -o fig.pdf [--png fig.png]
    gradsched report figure fit-mape --fits fits.csv -o fig.pdf
    gradsched report figure replay-vs-world-size --input replay.csv [--family F] -o fig.pdf
    gradsched report figure timeline --input wfbp.timeline.csv mgwfbp.timeline.csv -o fig.pdf
    gradsched report figure gaps --input replay.csv -o fig.pdf
    gradsched report table fits|crossws|replay|compare --input X.csv --tex T.tex --md T.md
    gradsched report macros [--fits F] [--crossws C] [--replay R] [--compare K] -o macros.tex
    gradsched report topology-replay-table --input topo-replay.csv --tex T.tex --md T.md
    gradsched report scaling-table --input scaling.csv --tex T.tex --md T.md
    gradsched report sharded-table --input sharded.csv --tex T.tex --md T.md
    gradsched report collectives-at-scale-table --case LABEL crossws.csv [...] --tex T.tex \\
        --md T.md
    gradsched report at-scale --input at-scale.csv --summary S.json --tex T.tex --md T.md \\
        --macros M.tex
    gradsched report at-scale-variants --summary BEFORE.json AFTER.json --tex T.tex --md T.md
    gradsched report overlap-slowdown-table --input overlap.csv --tex T.tex --md T.md
    gradsched report compare [--nccl LOG TRACE.csv] [--bcaffe LOG RESULT.csv CASE] \\
        [--skip CHECK CASE REASON] -o compare.csv

No logic lives here: every sub-command formats what is on disk by calling
:mod:`gradsched.report` (``gradsched study ...`` runs the studies whose CSVs these format;
``report macros`` has the measuring side compute the re-execution's frames it quotes). One
module per group of verbs (:mod:`.collect`, :mod:`.figures`, :mod:`.tables`,
:mod:`.topology`, :mod:`.architectures`, :mod:`.paper`, :mod:`.scaling`, :mod:`.compare`,
:mod:`.sharded`, :mod:`.llm_scale`, :mod:`.collectives_at_scale`,
:mod:`.at_scale`, :mod:`.overlap`),
each with its ``register``; :func:`register` adds them in the order ``gradsched report
--help`` lists.
"""

from __future__ import annotations

import argparse

from gradsched.commands.report import (
    architectures,
    at_scale,
    collect,
    collectives_at_scale,
    compare,
    figures,
    llm_scale,
    overlap,
    paper,
    scaling,
    sharded,
    tables,
    topology,
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help="figures, tables, macros and checks from results")
    rsub = parser.add_subparsers(dest="report_command", metavar="WHAT", required=True)
    collect.register(rsub)
    figures.register(rsub)
    tables.register(rsub)
    topology.register(rsub)
    architectures.register(rsub)
    paper.register_captions(rsub)
    scaling.register(rsub)
    sharded.register(rsub)
    collectives_at_scale.register(rsub)
    llm_scale.register(rsub)
    at_scale.register(rsub)
    overlap.register(rsub)
    paper.register(rsub)
    compare.register(rsub)
    from gradsched.commands.report import fsdp_rival

    fsdp_rival.register(rsub)
