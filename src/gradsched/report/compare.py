"""Reproduced vs published numbers, each with a stated tolerance.

Only numbers that can be compared honestly are compared, and each check says which of two
kinds it is (column ``kind``): a ``self-check`` recomputes a number the source printed from
the rows we imported from the same log (it tests our parser, not a result), a
``reproduction`` compares what our own model computes with what the source measured.


* ``nccl-busbw`` -- the "Avg bus bandwidth" that nccl-tests prints at the end of its log
  (the mean bus bandwidth over every out-of-place and in-place row, GB = 1e9) against the
  same mean recomputed from our imported trace rows (``bytes / time_s`` times the
  collective's bus factor). A ``self-check``: it checks the importer end to end.
  Tolerance 0.5 % (the log prints times with 3-4 significant digits).
* ``bcaffe-merge`` -- the B-Caffe logs of the MG-WFBP authors time every blob's
  all-reduce alone (``comm_us``) and, in MG-WFBP mode, the merged all-reduces
  (``merged_us``). The measured ratio sum(merged) / sum(single) is compared with our
  replay's ratio of communication busy time, MG-WFBP over WFBP, on the same compute and comm
  traces. A ``reproduction``, and a coarse one (tolerance 25 %): B-Caffe's own merge
  decisions and its per-layer (weight+bias) timing differ from our per-tensor replay.

A check whose external log is absent is written as ``skipped`` with the reason; nothing is
filled in. :func:`compare_table` and :func:`compare_macros` format the checks for the paper.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gradsched.errors import InputError
from gradsched.intermediates import read_csv_frame
from gradsched.io import read_bytes
from gradsched.report.formatting import MISSING, fmt
from gradsched.report.latex import NA, number

COMPARE_COLUMNS = ("check", "kind", "case", "published", "reproduced", "unit", "abs_diff",
                   "rel_diff_pct", "tolerance_pct", "verdict", "note")
NCCL_TOLERANCE_PCT = 0.5
BCAFFE_TOLERANCE_PCT = 25.0
CHECK_KINDS = {"nccl-busbw": "self-check", "bcaffe-merge": "reproduction"}
"""What each check tests: our parser (``self-check``) or our model against a published
measurement (``reproduction``)."""
BUS_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}
_AVG_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_BCAFFE_RE = re.compile(r"distributed\.cpp:\d+\]\s*\[([^\]]*)\]\s*$")


@dataclass(frozen=True)
class Row:
    check: str
    case: str
    published: float
    reproduced: float
    unit: str
    tolerance_pct: float
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        diff = self.reproduced - self.published
        rel = 100.0 * diff / self.published if self.published else math.nan
        ok = not math.isnan(rel) and abs(rel) <= self.tolerance_pct
        return {"check": self.check, "kind": CHECK_KINDS[self.check], "case": self.case,
                "published": self.published,
                "reproduced": self.reproduced, "unit": self.unit, "abs_diff": diff,
                "rel_diff_pct": rel, "tolerance_pct": self.tolerance_pct,
                "verdict": "within" if ok else "outside", "note": self.note}


def _log_text(log: str | Path) -> str:
    """The text of a tool's log through the input gate (size bound, errors naming the
    file): undecodable bytes replaced and newlines universal, as ``Path.read_text(
    encoding="utf-8", errors="replace")`` reads it."""
    text = read_bytes(log).decode("utf-8", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def printed_avg_busbw(log: str | Path) -> float:
    """The 'Avg bus bandwidth' (GB/s) an nccl-tests log prints."""
    found = _AVG_RE.findall(_log_text(log))
    if not found:
        raise InputError("no '# Avg bus bandwidth' line", path=log)
    return float(found[-1])


def recomputed_avg_busbw(trace_csv: str | Path) -> float:
    """Mean bus bandwidth (GB/s, GB = 1e9) over every row of an imported comm trace."""
    frame = read_csv_frame(trace_csv, comment="#")
    factors = [BUS_FACTOR[c](int(n)) for c, n in zip(frame["collective"], frame["world_size"],
                                                    strict=True)]
    busbw = frame["bytes"] / frame["time_s"] * pd.Series(factors, index=frame.index)
    return float(busbw.mean() / 1e9)


def nccl_busbw_row(log: str | Path, trace_csv: str | Path) -> dict[str, object]:
    """The check of one nccl-tests log; skipped (saying why) when the log prints no average,
    as a published excerpt of the table alone (the AWS p5 log) does not."""
    if not _AVG_RE.search(_log_text(log)):
        return skipped_row("nccl-busbw", Path(trace_csv).stem,
                           "the log prints no 'Avg bus bandwidth' (an excerpt of the table)")
    return Row("nccl-busbw", Path(trace_csv).stem, printed_avg_busbw(log),
               recomputed_avg_busbw(trace_csv), "GB/s", NCCL_TOLERANCE_PCT,
               "printed by nccl-tests vs recomputed from the imported rows").as_dict()


def bcaffe_last_dump(log: str | Path) -> pd.DataFrame:
    """The last complete dump with non-zero compute times of a B-Caffe log
    (columns param_id, size, compute_us, comm_us, merged_us)."""
    dumps: list[list[list[float]]] = []
    for raw in _log_text(log).splitlines():
        match = _BCAFFE_RE.search(raw.strip())
        if not match:
            continue
        values = [float(v) for v in match.group(1).split(",")]
        if values[0] == 0:
            dumps.append([])
        if dumps:
            dumps[-1].append(values)
    if not dumps:
        raise InputError("no B-Caffe 'distributed.cpp] [...]' lines", path=log)
    full = max(len(d) for d in dumps)
    for dump in reversed(dumps):
        if len(dump) == full and any(v[2] > 0 for v in dump):
            cols = ["param_id", "size", "compute_us", "comm_us", "merged_us"][: len(dump[0])]
            return pd.DataFrame(dump, columns=cols)
    raise InputError("no complete dump with non-zero compute times", path=log)


def bcaffe_merge_row(log: str | Path, replay_csv: str | Path, case: str) -> dict[str, object]:
    dump = bcaffe_last_dump(log)
    if "merged_us" not in dump or dump["merged_us"].sum() <= 0:
        raise InputError("the dump has no merged_us times (not an MG-WFBP run)", path=log)
    published = float(dump["merged_us"].sum() / dump["comm_us"].sum())
    results = read_csv_frame(replay_csv).set_index("algorithm")
    for alg in ("wfbp", "mgwfbp"):
        if alg not in results.index:
            raise InputError(f"the replay results lack {alg}", path=replay_csv)
    reproduced = float(results.loc["mgwfbp", "comm_busy_s"] / results.loc["wfbp", "comm_busy_s"])
    return Row("bcaffe-merge", case, published, reproduced, "ratio", BCAFFE_TOLERANCE_PCT,
               "comm time merged/per-blob: B-Caffe log vs replay (MG-WFBP/WFBP busy time)"
               ).as_dict()


def skipped_row(check: str, case: str, reason: str) -> dict[str, object]:
    return {"check": check, "kind": CHECK_KINDS.get(check, ""), "case": case,
            "published": math.nan, "reproduced": math.nan,
            "unit": "", "abs_diff": math.nan, "rel_diff_pct": math.nan,
            "tolerance_pct": (NCCL_TOLERANCE_PCT if check == "nccl-busbw"
                              else BCAFFE_TOLERANCE_PCT),
            "verdict": "skipped", "note": reason}


def compare_frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))
    return frame.sort_values(["kind", "check", "case"], kind="stable").reset_index(drop=True)


def compare_table(compare: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Reproduced vs published numbers with their tolerance; ``kind`` tells a reproduction
    of a published result from a self-check of our parser (:data:`gradsched.report.compare.
    CHECK_KINDS`)."""
    cols = ["kind", "check", "case", "published", "reproduced", "difference [%]", "tolerance [%]",
            "verdict"]
    if compare.empty:
        return pd.DataFrame(columns=cols), "lllrrrrl"
    kind = compare["kind"] if "kind" in compare else pd.Series("", index=compare.index)
    out = pd.DataFrame({
        "kind": kind.fillna(""), "check": compare["check"], "case": compare["case"],
        "published": [_value(v, u) for v, u in zip(compare["published"], compare["unit"],
                                                   strict=True)],
        "reproduced": [_value(v, u) for v, u in zip(compare["reproduced"], compare["unit"],
                                                    strict=True)],
        "difference [%]": compare["rel_diff_pct"].map(lambda v: fmt(v, 3)),
        "tolerance [%]": compare["tolerance_pct"].map(lambda v: fmt(v, 1)),
        "verdict": compare["verdict"],
    })
    return out, "lllrrrrl"


def _value(value: object, unit: object) -> str:
    text = fmt(value, 4 if str(unit) in ("ratio", "x") else 3)
    return text if text == MISSING else f"{text} {unit}"


def compare_macros(compare: pd.DataFrame | None) -> dict[str, str]:
    """Reproduced vs published (:mod:`gradsched.report.compare`): all checks, then the
    parser's self-checks (``CompareSelf...``) apart from the reproductions of published
    measurements (``CompareRepro...``: count, within tolerance, the tolerance, the range of
    published and reproduced values, and the largest relative difference)."""
    keys = ["CompareNumChecked", "CompareNumWithin", "CompareNumSkipped"]
    keys += [f"Compare{scope}{key}" for scope in ("Self", "Repro")
             for key in ("NumChecked", "NumWithin", "TolerancePct", "MaxAbsDiffPct")]
    keys += [f"CompareRepro{what}{end}" for what in ("Published", "Reproduced")
             for end in ("Min", "Max")]
    out = dict.fromkeys(keys, NA)
    if compare is None or compare.empty:
        return out
    checked = compare[compare["verdict"].isin(["within", "outside"])]
    out["CompareNumChecked"] = str(len(checked))
    out["CompareNumWithin"] = str(int((checked["verdict"] == "within").sum()))
    out["CompareNumSkipped"] = str(int((compare["verdict"] == "skipped").sum()))
    if "kind" not in checked:
        return out
    for scope, kind in (("Self", "self-check"), ("Repro", "reproduction")):
        rows = checked[checked["kind"] == kind]
        if rows.empty:
            continue
        out[f"Compare{scope}NumChecked"] = str(len(rows))
        out[f"Compare{scope}NumWithin"] = str(int((rows["verdict"] == "within").sum()))
        tolerance = rows["tolerance_pct"].astype(float).unique()
        out[f"Compare{scope}TolerancePct"] = (number(float(tolerance[0]), 1)
                                             if len(tolerance) == 1 else NA)
        diff = rows["rel_diff_pct"].astype(float).abs().max()
        out[f"Compare{scope}MaxAbsDiffPct"] = number(float(diff), 1 if scope == "Repro" else 3)
        if scope == "Repro":
            for what, column in (("Published", "published"), ("Reproduced", "reproduced")):
                out[f"CompareRepro{what}Min"] = number(float(rows[column].min()), 2)
                out[f"CompareRepro{what}Max"] = number(float(rows[column].max()), 2)
    return out
