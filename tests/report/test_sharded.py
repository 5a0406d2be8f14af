"""The sharded table: one row per case and planner, speedup over FSDP2's defaults.

The rows are SYNTHETIC (hand-made), not measurements."""

from __future__ import annotations

import pandas as pd

from gradsched.report.sharded import HEADER, sharded_table


def rows() -> pd.DataFrame:
    base = {"compute": "m", "network": "n", "world_size": 2, "semantics": "blocking",
            "n_units": 4, "forward_prefetch": 1, "backward_prefetch": 1,
            "reshard_after_forward": True, "compute_s": 1.0, "gathered_peak_bytes": 2**21,
            "resident_bytes": 2**22, "n_collectives": 9, "lower_bound_s": 1.5}
    return pd.DataFrame([
        base | {"algorithm": "fsdp2", "iteration_s": 3.0, "exposed_comm_s": 2.0},
        base | {"algorithm": "sharded-optimum", "iteration_s": 2.0, "exposed_comm_s": 1.0,
                "reshard_after_forward": False},
    ])


def test_speedup_is_over_the_fsdp2_default_of_the_same_case() -> None:
    table, align = sharded_table(rows())
    assert list(table.columns) == HEADER and len(align) == len(HEADER)
    assert table["vs FSDP2 [x]"].tolist() == ["1.000", "1.500"]
    assert table["peak [MiB]"].tolist() == ["2", "2"]
    assert table["above bound [%]"].tolist() == ["100.0", "33.3"]


def test_an_empty_input_gives_an_empty_table() -> None:
    table, _ = sharded_table(pd.DataFrame())
    assert table.empty and list(table.columns) == HEADER
