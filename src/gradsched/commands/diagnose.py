"""gradsched diagnose TRACE... [--comm SWEEP] [--framework ddp|fsdp2|deepspeed|megatron]

One or more ranks' Kineto (PyTorch profiler) traces of a training step: per collective,
when it became ready, was launched, started and ended on the device, and how much of it was
exposed (HTA's interval arithmetic); the same layout replayed on the same compute with a
comm model (``--comm``, else one fitted on the trace's own collectives) for the predicted
exposure; the cause of each gap; and what to change in the framework's terms, with the
predicted gain and its band (:mod:`gradsched.diagnose`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gradsched.commands._args import integer
from gradsched.commands._outputs import output_file, output_folder

FRAMEWORK_CHOICES = ("ddp", "fsdp2", "deepspeed", "megatron")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="why a job's communication is exposed: observed "
                       "against predicted overlap per collective, the cause and the fix",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+", type=Path,
                   help="Kineto trace(s) of one step: one file per rank, or a .tar.gz of them")
    p.add_argument("--comm", default=None,
                   help="comm sweep CSV, fitted model JSON or alpha-beta:alpha=..,beta=.. "
                        "(default: a model fitted on the trace's own collectives)")
    p.add_argument("--framework", default=None, choices=FRAMEWORK_CHOICES,
                   help="word the fixes for this framework (default: from the layout)")
    p.add_argument("--step", type=integer(0, 2**31), default=None,
                   help="ProfilerStep number (default: the median-length step)")
    p.add_argument("--csv", type=output_file, default=None,
                   help="write the per-collective table")
    p.add_argument("--causes-csv", type=output_file, default=None,
                   help="write the causes found, one row each")
    p.add_argument("--planted", type=output_file, default=None, metavar="CSV",
                   help="instead: plant each fault (SYNTHETIC) in each TRACE file, taken as "
                        "one job each, diagnose, and write the check to CSV")
    p.add_argument("--tables", type=output_folder, default=None, metavar="DIR",
                   help="write the paper table (diagnose-collectives, or with --planted "
                        "diagnose-planted; .tex and .md) to DIR")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.costmodel.domain_notes import print_notes
    from gradsched.diagnose.run import Settings, diagnose
    from gradsched.io import write_csv_atomic

    settings = Settings(tuple(str(t) for t in args.traces), comm=args.comm,
                        framework=args.framework, step=args.step).check()
    if args.planted is not None:
        return _planted(args)
    model = load_comm_spec(args.comm) if args.comm else None
    result = diagnose(settings, model)
    _print(result)
    print_notes("diagnose", result.notes)
    if args.csv:
        write_csv_atomic(args.csv, result.frame)
    if args.causes_csv:
        write_csv_atomic(args.causes_csv, result.causes)
    if args.tables is not None:
        from gradsched.report.diagnose import write_diagnose_table

        write_diagnose_table("collectives", result.frame, args.tables)
    return 0


def _planted(args: argparse.Namespace) -> int:
    from gradsched.diagnose.planted import planted_table
    from gradsched.diagnose.run import documents
    from gradsched.errors import ConfigError
    from gradsched.io import write_csv_atomic

    unused = [name for name, value in (("--comm", args.comm), ("--framework", args.framework),
                                       ("--step", args.step), ("--csv", args.csv),
                                       ("--causes-csv", args.causes_csv)) if value is not None]
    if unused:
        raise ConfigError(f"--planted diagnoses each file with its own fitted model and "
                          f"step; it does not take {', '.join(unused)}")
    names = [Path(t).name.split(".")[0] for t in args.traces]
    if len(set(names)) != len(names):
        raise ConfigError(f"--planted: two traces share a name ({names})")
    table = planted_table({n: documents([str(t)]) for n, t in zip(names, args.traces,
                                                                    strict=True)})
    write_csv_atomic(args.planted, table)
    for r in table.itertuples(index=False):
        named = "n/a" if not r.applicable else ("named" if r.found else "NOT NAMED")
        extra = f"; false: {r.false_causes}" if r.false_causes else ""
        print(f"{r.trace}: {r.fault} ({r.target or '-'}): {named}{extra}"
              f"{'; ' + r.note if r.note else ''}")
    if args.tables is not None:
        from gradsched.report.diagnose import write_diagnose_table

        write_diagnose_table("planted", table, args.tables)
    return 0


def _ms(value: Any) -> str:
    return f"{float(value) * 1e3:.3f}"


def _print(result: Any) -> None:
    from gradsched.diagnose.layout import layout_line

    print(layout_line(result.layout))
    print("rank coll  kind            MiB  phase     ready  launch  start    end  exposed "
          "predicted  cause   (ms from the step start)")
    for r in result.frame.itertuples(index=False):
        mib = "-" if r.bytes != r.bytes or r.bytes is None else f"{float(r.bytes) / 2**20:.2f}"
        print(f"{int(r.rank):4d} {int(r.index):4d}  {r.collective:<12} {mib:>6}  "
              f"{r.phase:<8} {_ms(r.ready_s):>6} {_ms(r.launch_s):>7} {_ms(r.start_s):>6} "
              f"{_ms(r.end_s):>6} {_ms(r.exposed_s):>8} {_ms(r.predicted_exposed_s):>9}  "
              f"{r.causes or '-'}")
    for c in result.causes[result.causes["index"] < 0].itertuples(index=False):
        print(f"rank {int(c.rank)}: {c.cause}: {c.detail}")
    if result.fixes.empty:
        print("no cause found: the observed exposure is what the layout allows on this "
              "compute")
        return
    print(f"what to change ({result.framework}):")
    for f in result.fixes.itertuples(index=False):
        if f.cause == "host-bound":
            gain = "gain not quantified"
        elif f.cause == "nothing-to-hide":
            gain = f"predicted gain up to {_ms(f.gain_high_s)} ms per step"
        else:
            gain = (f"predicted gain {_ms(f.gain_s)} ms per step (band {_ms(f.gain_low_s)}-"
                    f"{_ms(f.gain_high_s)})")
        print(f"  {f.cause} (ranks {f.ranks}): {gain}")
        print(f"    {f.change}")
