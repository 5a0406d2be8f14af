"""The accumulation-mode and rival tables (:mod:`gradsched.report.fsdp_rival`) and the
medians of the rival plans' run (:func:`gradsched.experiments.sharded.rival.measured_rows`),
on SYNTHETIC rows; ``report fsdp-rival-measured-table --input`` on the committed run."""

from __future__ import annotations

import pandas as pd
import pytest

from gradsched.experiments.sharded.rival import measured_rows
from gradsched.report.fsdp_rival import accumulation_table, rival_measured_table, rival_table

RUN = "paper/data/sharded-rival/resnet18-b4-p2-loopback/iterations.csv"


def test_measured_rows_are_medians_over_fsdp2s() -> None:
    frame = pd.DataFrame({"plan": ["plans/none/fsdp2.json"] * 3 + ["plans/none/x.json"] * 3,
                          "algorithm": ["fsdp2"] * 3 + ["fsdp-milp"] * 3,
                          "iteration_s": [1.0, 2.0, 3.0, 0.5, 1.0, 9.0]})
    rows = measured_rows(frame)
    assert [r["measured_s"] for r in rows] == [2.0, 1.0]
    assert [r["speedup_vs_fsdp2"] for r in rows] == [1.0, 2.0]
    assert rows[1]["cap"] == "none"
    table, _ = rival_measured_table(rows)
    assert table.iloc[1].tolist()[:2] == ["none", "FSDP MILP"]


def test_the_tables_format_every_row() -> None:
    accum = pd.DataFrame([{"case": "c", "network": "n", "world_size": 2, "grad_accum": 4,
                           "mode": "no-sync", "step_s": 1.23456, "all_gathers": 3,
                           "reduce_scatters": 1, "gathered_peak_bytes": 2**21,
                           "extra_peak_bytes": 2**20, "step_over_fastest": 1.0}])
    table, align = accumulation_table(accum)
    assert table.iloc[0].tolist()[5:] == ["1.235", "3", "1", "--", "2", "1", "1.000"]
    assert table.iloc[0].tolist()[2] == "1 x 2"
    assert len(align) == table.shape[1]
    hsdp = accum.assign(world_size=4, replicate=2, shard=2, all_reduces=9)
    assert accumulation_table(hsdp)[0].iloc[0].tolist()[2:9] == ["2 x 2", "4", "no-sync",
                                                                "1.235", "3", "1", "9"]
    rival = pd.DataFrame([{"case": "c", "network": "n", "cap": "none", "algorithm": "fsdp-milp",
                           "n_units": 3, "forward_prefetch": 1, "backward_prefetch": 1,
                           "step_s": float("nan"), "gathered_peak_bytes": float("nan"),
                           "fits_cap": False, "step_over_optimum": float("nan"),
                           "milp_status": "infeasible"}])
    table, align = rival_table(rival)
    assert table.iloc[0].tolist()[3] == "FSDP MILP" and table.iloc[0].tolist()[-1] == "infeasible"
    assert len(align) == table.shape[1]


@pytest.mark.parametrize("verb", ["fsdp-rival-measured-table"])
def test_the_table_verb_reads_its_input(tmp_path, verb) -> None:
    from gradsched.cli import main

    tex, md = tmp_path / "t.tex", tmp_path / "t.md"
    assert main(["report", verb, "--input", RUN, "--tex", str(tex), "--md", str(md)]) == 0
    assert "FSDP MILP" in md.read_text()
