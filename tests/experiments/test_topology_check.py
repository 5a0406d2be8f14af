"""The pipeline's topology check on the shipped ABCI sweeps."""

from __future__ import annotations


def test_topology_check_on_the_shipped_abci_sweeps(tmp_path) -> None:
    """The pipeline's check: the 2-node sweep identifies the inter level (in sample), the
    larger sweeps are predicted; the hierarchical model with a log-depth inter level beats a
    ring-only one out of sample (the paper's table)."""
    from pathlib import Path

    from gradsched.cli import main
    from gradsched.experiments.topology_check import topology_check

    ext = Path(__file__).resolve().parents[2] / "traces/comm/external"
    sweeps = [ext / f"nccl-abci-inter-anode-{n}.csv" for n in (2, 4, 8, 16)]
    frame = topology_check(ext / "nccl-abci-intra-anode-8.csv", sweeps)
    assert len(frame) == 12 and frame["in_sample"].sum() == 3
    out = frame[~frame["in_sample"]].set_index(["collective_model", "inter_algorithm",
                                                "nodes"])["mape_pct"]
    for nodes in (8, 16):
        assert out[("hierarchical", "best", nodes)] < out[("hierarchical", "ring", nodes)]
        assert out[("hierarchical", "best", nodes)] < out[("flat", "ring", nodes)]
    assert main(["study", "topology-check", "--intra", str(ext / "missing.csv"), "--sweep",
                 str(sweeps[0]), "-o", str(tmp_path / "c.csv")]) == 2
    assert not (tmp_path / "c.csv").exists()
