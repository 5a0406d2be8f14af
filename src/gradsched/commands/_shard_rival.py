"""``gradsched shard rival``: the sharded optimum against PyTorch's FSDP-unit MILP (a
reconstruction of ``fsdp_ilp.fsdp_milp``, never released in torch) and FSDP2's defaults.

    gradsched shard rival --compute TRACE.csv --comm SWEEP.csv --world-size 2 \\
        [--semantics blocking] [--plans-dir DIR] [-o OUT.csv]

Per cap (none; FSDP2's default predicted peak): each plan replayed, its step time and peak,
whether it fits, its step time over the optimum's
(:mod:`gradsched.experiments.sharded.rival`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._args import add_sharded_case
from gradsched.commands._outputs import output_file, output_folder


def add_rival(ssub: argparse._SubParsersAction) -> None:
    """Register ``shard rival``."""
    p = ssub.add_parser("rival", help="the sharded optimum vs PyTorch's FSDP-unit MILP "
                        "(reconstructed) and FSDP2's defaults, replayed")
    add_sharded_case(p)
    p.add_argument("--plans-dir", type=output_folder, default=None,
                   help="write every plan JSON here (<cap>/<algorithm>.json)")
    p.add_argument("-o", "--output", type=output_file, default=None, help="table CSV")
    p.set_defaults(func=_rival)


def _rival(args: argparse.Namespace) -> int:
    import pandas as pd

    from gradsched.costmodel.base import load_comm_spec
    from gradsched.experiments.sharded.rival import case_name, rival_rows
    from gradsched.io import write_csv_atomic
    from gradsched.staging import Staging
    from gradsched.traces.bundle import ComputeTrace

    trace = ComputeTrace.load(args.compute)
    model = load_comm_spec(args.comm)
    plans: dict = {}
    rows = rival_rows(trace, model, args.world_size, args.semantics,
                      case=case_name(args.compute), network=case_name(args.comm), plans=plans)
    frame = pd.DataFrame(rows)
    shown = ["cap", "algorithm", "n_units", "step_s", "gathered_peak_bytes", "fits_cap",
             "step_over_optimum"]
    print(frame[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.output is not None:
        write_csv_atomic(args.output, frame)
    if args.plans_dir is not None:
        with Staging() as staging:
            folder = staging.folder(Path(args.plans_dir))
            for name, plan in plans.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                plan.save(folder / f"{name}.json")
    return 0
