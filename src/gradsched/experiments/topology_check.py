"""Two-level topology against measured multi-node sweeps.

The inter-node level is identified from the smallest multi-node sweep
(:func:`gradsched.costmodel.topology_fit.identify_inter_level`; a reconstruction: no public
sweep isolates the network), the intra-node level is the one-node sweep, and every
multi-node sweep is predicted, the larger ones out of sample. One row per (collective
model, inter-node algorithm, sweep): mean absolute percentage error over all sizes and over
sizes of at least 1 MiB.

:mod:`gradsched.report.topology` formats the frame (:func:`~gradsched.report.topology.
topology_table`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.costmodel.base import load_comm_spec
from gradsched.costmodel.topology_fit import (
    identify_inter_level,
    load_all_reduce_sweep,
    predict_sweep,
)

VARIANTS = (("hierarchical", "best"), ("hierarchical", "ring"), ("flat", "ring"))
"""(collective model, inter-node algorithm) pairs checked: ``best`` is the analytic
minimum over the algorithms (a tree-like latency at small sizes), ``ring`` the ring only."""


LARGE_BYTES = 2**20



def topology_check(intra: str | Path, sweeps: Sequence[str | Path]) -> pd.DataFrame:
    """Identify the inter level from ``sweeps[0]`` and predict every sweep, per variant."""
    intra_model = load_comm_spec(str(intra))
    nbytes, times, world, nodes = load_all_reduce_sweep(sweeps[0])
    rows = []
    for collective_model, algorithm in VARIANTS:
        inter = identify_inter_level(intra_model, nbytes, times, nodes, world // nodes,
                                     collective_model, algorithm)
        for path in sweeps:
            pred = predict_sweep(intra_model, inter, path, collective_model)
            err = pred["error_pct"].abs()
            large = pred["bytes"] >= LARGE_BYTES
            rows.append({
                "collective_model": collective_model, "inter_algorithm": algorithm,
                "sweep": Path(path).stem, "nodes": int(pred["nodes"].iloc[0]),
                "world_size": int(pred["world_size"].iloc[0]),
                "in_sample": Path(path) == Path(sweeps[0]),
                "mape_pct": float(err.mean()),
                "mape_large_pct": float(err[large].mean()) if large.any() else np.nan,
                "inter_alpha_s": inter.alpha, "inter_beta_s_per_byte": inter.beta,
            })
    return pd.DataFrame(rows)
