"""The layout recognised from a rank's collectives (hand-made frames: the columns of
:mod:`gradsched.diagnose.observe`)."""

from __future__ import annotations

import pandas as pd

from gradsched.diagnose.layout import layout_line, recognise


def _frame(rows: list[tuple[str, str, int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"collective": c, "phase": p, "bytes": b, "start_s": s,
                          "drained_s": d, "stream": "9"} for c, p, b, s, d in rows])


def test_fsdp2_units_with_prefetch() -> None:
    f = _frame([("all_gather", "forward", 4 << 20, 0.001, 0.001),  # waited: first unit
                ("all_gather", "forward", 4 << 20, 0.002, 0.003),  # ran ahead: prefetched
                ("reduce_scatter", "backward", 8 << 20, 0.010, 0.010),
                ("reduce_scatter", "backward", 8 << 20, 0.012, 0.012)])
    facts = recognise(f)
    assert (facts["layout"], facts["units"], facts["prefetched"]) == ("fsdp2", 2, 1)
    assert "2 FSDP units" in layout_line(facts)


def test_torchrec_pattern_is_not_fsdp() -> None:
    f = _frame([("reduce_scatter", "forward", 1 << 20, 0.001, 0.001),
                ("all_gather", "backward", 1 << 20, 0.002, 0.002),
                ("all_reduce", "backward", 2 << 20, 0.003, 0.003)])
    facts = recognise(f)
    assert facts["layout"] == "ddp" and facts["buckets"] == 1
    assert "not FSDP's pattern" in layout_line(facts)
