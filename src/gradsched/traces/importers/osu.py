"""Import OSU Micro-Benchmarks collective latency output (``osu_allreduce``) into a comm trace.

Rules (see ``traces/README.md``):

* The header ``# Size  Avg Latency(us) [Min Latency(us) Max Latency(us) Iterations]`` fixes
  the columns (split on runs of two or more spaces). ``Avg`` -> ``time_s``, ``Min`` ->
  ``time_min_s``, ``Max`` -> ``time_max_s`` (microseconds -> seconds).
* After a header every non-blank line that does not start with ``#`` must be a complete
  data row; anything else is an error naming the line and field. Sizes must increase.
* A size written ``N,SIZE`` (the B-Caffe ``allreduce{2,8}.log`` files prefix the node
  count) is accepted when ``N`` equals ``--nodes``; otherwise it is an error.
* A file holding several runs (several headers) keeps the LAST run, with a warning.
* World size and nodes are not in OSU output: ``--world-size`` and ``--nodes`` are
  required. The backend is ``mpi`` unless ``--backend`` says otherwise; ``osu_allreduce``
  uses separate send and receive buffers, so ``in_place`` is 0.
* Noise: a time that falls by more than 2x while the size grows is a warning, not an error.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradsched.errors import InputError
from gradsched.traces.columns import COLLECTIVES
from gradsched.traces.importers import (
    CommFacts,
    ImportResult,
    WarningSink,
    build_comm_trace,
    check_size_drops,
    comm_meta,
    read_lines,
    read_provenance,
)
from gradsched.traces.validate import strict_float

NAME = "osu"

_KNOWN = {
    "Size": "size",
    "Avg Latency(us)": "avg",
    "Min Latency(us)": "min",
    "Max Latency(us)": "max",
    "Iterations": "iterations",
}
_TITLE_RE = re.compile(r"^#\s*OSU MPI(?:-\w+)? (?P<name>.+?) (?:Latency )?Test v(?P<ver>\S+)")
_COLLECTIVE_OF_TITLE = {
    "Allreduce": "all_reduce", "Allgather": "all_gather", "Reduce_scatter": "reduce_scatter",
    "Reduce-Scatter": "reduce_scatter", "Broadcast": "broadcast", "Bcast": "broadcast",
    "Reduce": "reduce",
}


@dataclass
class Options:
    """Command-line knobs of the OSU importer."""

    world_size: int | None = None
    nodes: int | None = None
    backend: str = "mpi"
    collective: str | None = None
    source: str | None = None
    hardware: str | None = None
    interconnect: str | None = None
    note: str | None = None  # appended to the metadata notes


@dataclass
class Row:
    """One data row."""

    size: int
    avg_us: float
    min_us: float | None
    max_us: float | None
    iterations: int | None
    line: int


@dataclass
class Run:
    """One benchmark run: a header and its rows."""

    header_line: int
    columns: list[str]
    rows: list[Row] = field(default_factory=list)
    title: str | None = None
    version: str | None = None
    datatype: str | None = None


def _parse_header(text: str, number: int, path: Path) -> list[str]:
    parts = re.split(r"\s{2,}", text.lstrip("#").strip())
    columns = []
    for part in parts:
        if part not in _KNOWN:
            raise InputError(f"unknown OSU column {part!r}", path=path, line=number,
                             field="header")
        columns.append(_KNOWN[part])
    if columns[:2] != ["size", "avg"]:
        raise InputError("the OSU header must start with 'Size' and 'Avg Latency(us)'",
                         path=path, line=number, field="header")
    return columns


def _float(token: str, name: str, number: int, path: Path) -> float:
    where = {"path": path, "line": number, "field": name}
    try:
        value = strict_float(token)
    except ValueError:
        raise InputError(f"{token!r} is not a number", **where) from None
    if not math.isfinite(value):
        raise InputError(f"{token!r} is not a finite number", **where)
    if value <= 0:
        raise InputError(f"latency {token} must be greater than zero", **where)
    return value


def _size(token: str, number: int, path: Path, nodes: int | None) -> int:
    where = {"path": path, "line": number, "field": "size"}
    if "," in token:
        prefix, token = token.split(",", 1)
        if not prefix.isdigit():
            raise InputError(f"{prefix!r} is not a node count", **where)
        if nodes is None or int(prefix) != nodes:
            raise InputError(f"the size is prefixed with node count {prefix} but --nodes is "
                             f"{nodes}", **where)
    if not token.isdigit() or int(token) <= 0:
        raise InputError(f"{token!r} is not a positive integer size", **where)
    return int(token)


def _parse_row(text: str, number: int, run: Run, path: Path, nodes: int | None) -> Row:
    tokens = text.split()
    if len(tokens) != len(run.columns):
        raise InputError(
            f"expected {len(run.columns)} fields ({', '.join(run.columns)}), found "
            f"{len(tokens)}", path=path, line=number,
            field=run.columns[min(len(tokens), len(run.columns) - 1)],
        )
    cells = dict(zip(run.columns, tokens, strict=True))
    size = _size(cells["size"], number, path, nodes)
    values = {k: _float(cells[k], k, number, path) for k in ("avg", "min", "max") if k in cells}
    iterations = None
    if "iterations" in cells:
        if not cells["iterations"].isdigit():
            raise InputError(f"{cells['iterations']!r} is not an integer", path=path,
                             line=number, field="iterations")
        iterations = int(cells["iterations"])
    row = Row(size, values["avg"], values.get("min"), values.get("max"), iterations, number)
    if row.min_us is not None and row.min_us > row.avg_us:
        raise InputError("min latency is larger than avg latency", path=path, line=number,
                         field="min")
    if row.max_us is not None and row.max_us < row.avg_us:
        raise InputError("max latency is smaller than avg latency", path=path, line=number,
                         field="max")
    return row


def _parse_runs(lines: list[str], path: Path, nodes: int | None) -> list[Run]:
    runs: list[Run] = []
    title: tuple[str, str] | None = None
    datatype: str | None = None
    for index, raw in enumerate(lines):
        number, text = index + 1, raw.strip()
        if not text:
            continue
        if text.startswith("#"):
            match = _TITLE_RE.match(text)
            if match:
                title = (match.group("name"), match.group("ver"))
            elif text.lstrip("#").strip().startswith("Datatype:"):
                datatype = text.lstrip("#").strip()[len("Datatype:"):].strip().rstrip(".")
            elif text.lstrip("#").strip().startswith("Size"):
                run = Run(number, _parse_header(text, number, path))
                if title:
                    run.title, run.version = title
                run.datatype = datatype
                runs.append(run)
                title, datatype = None, None
            continue
        if not runs:
            continue  # preamble (command line, banner) before the first header
        run = runs[-1]
        if not text[0].isdigit():
            raise InputError(f"unexpected text inside the table: {text[:60]!r}", path=path,
                             line=number, field="size")
        row = _parse_row(text, number, run, path, nodes)
        if run.rows and row.size <= run.rows[-1].size:
            raise InputError(f"size {row.size} does not increase (previous row: "
                             f"{run.rows[-1].size})", path=path, line=number, field="size")
        run.rows.append(row)
    return runs


def _pick_run(runs: list[Run], path: Path, sink: WarningSink) -> Run:
    if not runs:
        raise InputError("no OSU header ('# Size  Avg Latency(us) ...') found", path=path)
    complete = [run for run in runs if run.rows]
    if not complete:
        raise InputError("the table has no data rows", path=path, line=runs[-1].header_line)
    if len(runs) > 1:
        sink.warn(f"{len(runs)} runs in the file; kept the last one (header on line "
                  f"{complete[-1].header_line})", line=complete[-1].header_line)
    return complete[-1]


def _collective(run: Run, options: Options, path: Path) -> str:
    if options.collective:
        if options.collective not in COLLECTIVES:
            raise InputError(f"--collective {options.collective!r} is not one of "
                             f"{', '.join(COLLECTIVES)}", path=path, field="collective")
        return options.collective
    if run.title is None:
        return "all_reduce"
    name = _COLLECTIVE_OF_TITLE.get(run.title)
    if name is None:
        raise InputError(f"OSU test {run.title!r} is not a supported collective; pass "
                         "--collective", path=path, field="collective")
    return name


def _require_counts(options: Options, path: Path) -> tuple[int, int]:
    for label, value in (("world-size", options.world_size), ("nodes", options.nodes)):
        if value is None:
            raise InputError(f"OSU output does not record the {label.replace('-', ' ')}: "
                             f"pass --{label}", path=path, field=label)
        if value <= 0:
            raise InputError(f"--{label} must be positive", path=path, field=label)
    assert options.world_size is not None and options.nodes is not None
    if options.nodes > options.world_size:
        raise InputError("--nodes is larger than --world-size", path=path, field="nodes")
    return options.world_size, options.nodes


def import_osu(path: str | Path, options: Options | None = None) -> ImportResult:
    """Parse one OSU latency log into a validated :class:`CommTrace`."""
    options = options or Options()
    path = Path(path)
    world, nodes = _require_counts(options, path)
    lines = read_lines(path)
    sink = WarningSink(path)
    run = _pick_run(_parse_runs(lines, path, nodes), path, sink)
    collective = _collective(run, options, path)
    check_size_drops([r.size for r in run.rows], [r.avg_us * 1e-6 for r in run.rows],
                     [r.line for r in run.rows], sink)
    rows: list[dict[str, Any]] = []
    for r in run.rows:
        row: dict[str, Any] = {
            "collective": collective, "backend": options.backend, "algorithm": "default",
            "world_size": world, "nodes": nodes, "in_place": False, "bytes": r.size,
            "time_s": r.avg_us * 1e-6,
        }
        if r.min_us is not None:
            row["time_min_s"] = r.min_us * 1e-6
        if r.max_us is not None:
            row["time_max_s"] = r.max_us * 1e-6
        rows.append(row)
    prov = read_provenance(lines)
    source, hardware = options.source or prov.source, options.hardware or prov.setup
    if not source or not hardware:
        raise InputError("no '# source:' / '# setup:' provenance header; pass --source and "
                         "--hardware", path=path, field="source" if not source else "hardware")
    software: dict[str, Any] = {"benchmark": "OSU Micro-Benchmarks"}
    if run.version:
        software["version"] = run.version
    if run.datatype:
        software["datatype"] = run.datatype
    iterations = sorted({r.iterations for r in run.rows if r.iterations is not None})
    notes = (
        f"{len(run.rows)} sizes from the OSU table (header line {run.header_line}); time_s = "
        "'Avg Latency(us)' / 1e6 (mean over the iterations and ranks)"
        + ("; time_min_s / time_max_s = Min / Max Latency(us) / 1e6" if "min" in run.columns
           else "")
        + f". world_size={world} and nodes={nodes} come from the importer flags (OSU output "
        "does not record them)."
    )
    if options.note:
        notes += " " + options.note
    meta = comm_meta(importer=NAME, path=path, warnings=sink, facts=CommFacts(
        source=source, hardware=hardware, statistic="mean", software=software, notes=notes,
        interconnect=options.interconnect, extra={"iterations": iterations or None}))
    trace = build_comm_trace(rows, meta)
    return ImportResult(comm=trace, warnings=list(sink.items))
