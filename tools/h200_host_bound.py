"""Judge every H200 hook capture host-bound or not by the project's one definition
(gradsched.traces.host_bound: the kineto-gpu importer's GPU busy share < 0.8).

A hook capture (traces/compute/h200/<stem>.csv, ``gradsched capture compute``) has no GPU
timeline of its own; the importer's sidecar of the hook-free profiled step of the same
configuration on the same machine (traces/compute/h200-kineto/<stem>.meta.json, written by
tools/h200_host_traces.py from data/h200/kineto-steps/) has one. This tool copies the
importer's verdict into the capture's sidecar as ``host_bound`` (share, threshold, rule and
the file it came from); the ``-corrected`` bundles carry it over when tools/h200_correct.py
rebuilds them. Nothing else in a sidecar changes.

A maintainer's tool, run by no pipeline rule. From the repository root::

    PYTHONPATH=src python tools/h200_host_bound.py          # write the judgements
    PYTHONPATH=src python tools/h200_host_bound.py --check  # exit 1 where a sidecar's
                                                            # judgement is missing or differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gradsched.io import write_json_atomic
from gradsched.traces.host_bound import record

CAPTURES = Path("traces/compute/h200")
IMPORTED = Path("traces/compute/h200-kineto")


def judgements() -> dict[Path, dict]:
    """Every capture sidecar (not the corrected bundles) -> its ``host_bound`` record."""
    out = {}
    for meta_path in sorted(CAPTURES.glob("*.meta.json")):
        stem = meta_path.name.removesuffix(".meta.json")
        if stem.endswith("-corrected"):
            continue
        source = IMPORTED / f"{stem}.meta.json"
        if not source.is_file():
            raise SystemExit(f"h200_host_bound: no importer sidecar {source} for {meta_path}")
        share = json.loads(source.read_text(encoding="utf-8"))["gpu_busy_share"]
        out[meta_path] = record(float(share), f"{source} (gpu_busy_share)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="compare the committed sidecars with the judgements")
    check = parser.parse_args(argv).check
    differ = 0
    for path, rec in judgements().items():
        meta = json.loads(path.read_text(encoding="utf-8"))
        if meta.get("host_bound") == rec:
            continue
        if check:
            print(f"h200_host_bound: {path} has no or another judgement", file=sys.stderr)
            differ += 1
            continue
        write_json_atomic(path, meta | {"host_bound": rec})
    print(f"h200_host_bound: {len(judgements()) - differ} of {len(judgements())} captures "
          "judged by the importer's rule")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
