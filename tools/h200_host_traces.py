"""Derive the per-layer host and device times of the 18 H200 hook-free profiler traces.

Reads ``data/h200/kineto-steps/<stem>.pt.trace.json.gz`` (raw, committed with their
provenance in ``data/h200/README.md``) with the kineto-gpu importer's host columns
(``gradsched import kineto --host``: ``host_forward_s``, ``host_backward_s``,
``forward_launches``, ``backward_launches`` beside the kernel times ``forward_s``,
``backward_s``) and writes ``traces/compute/h200-kineto/<stem>.csv`` and its sidecar:
the committed inputs of ``gradsched study host-check``. Model, batch size and the CUDA-event
medians come from ``kineto-steps-summary.json``.

A maintainer's tool, run by no pipeline rule. From the repository root::

    PYTHONPATH=src python tools/h200_host_traces.py          # rewrite the traces
    PYTHONPATH=src python tools/h200_host_traces.py --check  # regenerate elsewhere and
                                                             # compare (exit 1 on a change)
"""

from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from pathlib import Path

from gradsched.traces.importers.kineto_gpu import Options, import_kineto_gpu

RAW = Path("data/h200/kineto-steps")
OUT = Path("traces/compute/h200-kineto")
SOURCE = ("gradsched authors' measurement on one NVIDIA H200 (2026-11-26, torch "
          "2.11.0+cu130): data/h200/kineto-steps/{name} (hook-free, torch.profiler "
          "record_shapes=True, with_stack=False, 8 threads), imported with host columns by "
          "tools/h200_host_traces.py; MIT licence (LICENSE)")


def write(out: Path) -> list[Path]:
    summary = json.loads((RAW / "kineto-steps-summary.json").read_text())
    written = []
    for trace in sorted(RAW.glob("*.pt.trace.json.gz")):
        stem = trace.name.removesuffix(".pt.trace.json.gz")
        entry = summary[stem]
        options = Options(model=entry["model"], batch_size=int(entry["batch_size"]),
                          world_size=1, host=True, hardware="NVIDIA H200",
                          date="2026-11-26", source=SOURCE.format(name=trace.name))
        compute = import_kineto_gpu(trace, options).compute
        assert compute is not None
        compute.save(out / f"{stem}.csv")
        written += [out / f"{stem}.csv", out / f"{stem}.meta.json"]
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if not args.check:
        OUT.mkdir(parents=True, exist_ok=True)
        for path in write(OUT):
            print(f"wrote {path}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        changed = [p.name for p in write(Path(tmp))
                   if not filecmp.cmp(p, OUT / p.name, shallow=False)]
        total = len(list(Path(tmp).iterdir()))
    for name in changed:
        print(f"differs: {OUT / name}", file=sys.stderr)
    print(f"{total - len(changed)} of {total} files reproduced byte for byte")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
