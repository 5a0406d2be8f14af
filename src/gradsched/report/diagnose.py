"""The ``diagnose`` tables: one real trace's collectives (observed against predicted
exposure) and the planted-fault check. Formatting only: the frames come from
:mod:`gradsched.diagnose` (``run.FRAME_COLUMNS`` and ``planted.COLUMNS``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.report.formatting import fmt
from gradsched.report.latex import write_table


def _ms(value: object) -> str:
    return fmt(float(value) * 1e3, 3)  # type: ignore[arg-type]


def collectives_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per collective: size, phase, times (ms from the step start), observed and
    predicted exposure, causes."""
    rows = [{"rank": str(int(r.rank)), "#": str(int(r.index)), "collective": r.collective,
             "MiB": "-" if pd.isna(r.bytes) else fmt(float(r.bytes) / 2**20, 2),
             "phase": r.phase, "ready (ms)": _ms(r.ready_s), "launch (ms)": _ms(r.launch_s),
             "start (ms)": _ms(r.start_s), "end (ms)": _ms(r.end_s),
             "exposed (ms)": _ms(r.exposed_s),
             "predicted exposed (ms)": _ms(r.predicted_exposed_s),
             "cause": r.causes if isinstance(r.causes, str) and r.causes else "-"}
            for r in frame.itertuples(index=False)]
    return pd.DataFrame(rows), "rrllr" + "r" * 6 + "l"


def planted_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per (trace, planted fault): target, named or not, new false causes."""
    rows = []
    for r in frame.itertuples(index=False):
        named = ("yes" if r.found else "NO") if r.applicable else "n/a"
        rows.append({"trace": f"{r.trace} ({r.device}, {r.ranks} ranks)",
                     "planted fault": r.fault,
                     "target": r.target if isinstance(r.target, str) and r.target else "-",
                     "named": named,
                     "false causes": (r.false_causes if isinstance(r.false_causes, str)
                                      and r.false_causes else "none"),
                     "note": (r.knock_on and f"knock-on: {r.knock_on}") or r.note or ""})
    return pd.DataFrame(rows), "lllllp{18em}"  # the note wraps: the table fits the line


def write_diagnose_table(kind: str, frame: pd.DataFrame, folder: str | Path) -> None:
    """``diagnose-collectives`` or ``diagnose-planted`` (.tex and .md) in ``folder``."""
    make = collectives_table if kind == "collectives" else planted_table
    table, align = make(frame)
    folder = Path(folder)
    write_table(table, folder / f"diagnose-{kind}.tex", folder / f"diagnose-{kind}.md",
                align=align)
