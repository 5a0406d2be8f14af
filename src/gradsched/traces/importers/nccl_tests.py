"""Import nccl-tests / rccl-tests stdout into a comm trace.

Rules (see ``traces/README.md``):

* Lines may be indented and whitespace-collapsed; every line is read after ``strip()``.
  A launcher's output label in front of a line (Slurm ``srun --label``: ``0: ``; Open MPI
  ``--tag-output``: ``[1,0]<stdout>:``) is removed from each line first (the AWS p5 log in
  ``data/external/nccl-tests/`` carries ``0: ``).
* The collective comes from ``# Collective test starting: X_perf``, or from any ``X_perf``
  name before the table (command line, ``# setup:`` text); ``--collective`` overrides.
  Two different names and no flag -> error.
* The column header (``# size count type redop [root] time algbw busbw error|#wrong``
  twice) fixes the layout. After it, every non-blank line that does not start with ``#``
  must be a complete data row: a row with the wrong number of fields (a truncated log) or
  an unparsable field is an error naming the line and field. A file without data rows is
  an error. A repeated size is an error.
* Each row gives an out-of-place (``in_place`` 0) and an in-place (``in_place`` 1)
  measurement. A measurement whose ``#wrong`` is non-zero, whose ``error`` exceeds the
  tolerance, or whose error field carries an asterisk is dropped with a warning.
* Times are microseconds (-> seconds); algbw/busbw are GB/s with GB = 1e9 (-> bytes/s).
* World size = number of ``Rank N ... on HOST device D`` lines (one per GPU, also when one
  process drives several GPUs); nodes = number of distinct HOSTs. ``--world-size`` /
  ``--nodes`` supply them when the header lacks them and override them (with a warning)
  when they differ.
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

NAME = "nccl-tests"
DEFAULT_ERROR_TOLERANCE = 1e-2
"""Largest accepted value of the old layout's ``error`` column (max relative error)."""

_PERF_RE = re.compile(r"\b([a-z_]+)_perf\b")
_STARTING_RE = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_RANK_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s*(?:\[[^\]]*\])?\s*(?P<model>.*)$"
)
_NGPUS_RE = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_ITERS_RE = re.compile(r"(?<!warmup )iters:\s*(\d+)")
_VERSION_RE = re.compile(r"#\s*(nccl-tests version .*)$")
_RCCL_VERSION_RE = re.compile(r"^(rccl-tests: Version .*)$")
# srun --label ("0: ") and mpirun --tag-output ("[1,0]<stdout>:") prefixes.
_LAUNCHER_LABEL_RE = re.compile(r"^(?:\d+:|\[\d+,\d+\]<std(?:out|err)>:)\s?")

_PREFIX_COLUMNS = ("size", "count", "type", "redop", "root")
_GROUP_COLUMNS = ("time", "algbw", "busbw")


@dataclass
class Options:
    """Command-line knobs of the nccl-tests importer."""

    world_size: int | None = None
    nodes: int | None = None
    collective: str | None = None
    backend: str | None = None
    source: str | None = None
    hardware: str | None = None
    interconnect: str | None = None
    error_tolerance: float = DEFAULT_ERROR_TOLERANCE
    note: str | None = None  # appended to the metadata notes


@dataclass
class Header:
    """What the lines before (and around) the table say."""

    perf_names: list[tuple[str, int]] = field(default_factory=list)  # (collective, line)
    ranks: dict[int, tuple[str, str, int]] = field(default_factory=dict)  # rank -> host, model
    n_gpus: int | None = None
    iterations: int | None = None
    version: str | None = None
    rccl: bool = False
    columns: list[str] | None = None
    columns_line: int | None = None


@dataclass
class Measurement:
    """One (size, in_place) measurement from a data row."""

    size: int
    in_place: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    line: int


def _perf_collective(token: str) -> str:
    """``all_reduce_perf`` -> ``all_reduce``."""
    return token[: -len("_perf")] if token.endswith("_perf") else token


def _scan_header_line(text: str, number: int, header: Header, path: Path) -> None:
    """Record what a comment or preamble line says (ranks, collective, versions)."""
    started = _STARTING_RE.search(text)
    if started:
        header.perf_names.append((_perf_collective(started.group(1)), number))
    else:
        for name in _PERF_RE.findall(text):
            header.perf_names.append((name, number))
    rank = _RANK_RE.match(text)
    if rank:
        rank_id = int(rank.group("rank"))
        if rank_id in header.ranks:
            raise InputError(f"rank {rank_id} is listed twice", path=path, line=number,
                             field="Rank")
        header.ranks[rank_id] = (rank.group("host"), rank.group("model").strip(), number)
    gpus = _NGPUS_RE.search(text)
    if gpus:
        header.n_gpus = int(gpus.group(2))
        iters = _ITERS_RE.search(text)
        if iters:
            header.iterations = int(iters.group(1))
    version = _VERSION_RE.search(text) or _RCCL_VERSION_RE.search(text)
    if version:
        header.version = version.group(1).strip()
    if "rccl-tests" in text:
        header.rccl = True


def _is_column_header(text: str) -> bool:
    tokens = text.lstrip("#").split()
    return len(tokens) >= 8 and tokens[:2] == ["size", "count"] and "time" in tokens


def _parse_columns(text: str, number: int, path: Path) -> list[str]:
    """Column names of the table, with the in-place group suffixed ``_ip``."""
    tokens = text.lstrip("#").split()
    first_time = tokens.index("time")
    prefix, groups = tokens[:first_time], tokens[first_time:]
    if any(tok not in _PREFIX_COLUMNS for tok in prefix) or len(groups) != 8:
        raise InputError(f"unrecognised nccl-tests column header: {' '.join(tokens)}",
                         path=path, line=number, field="header")
    check = groups[3]
    if check not in ("error", "#wrong") or groups[:3] != list(_GROUP_COLUMNS):
        raise InputError(f"unrecognised nccl-tests column header: {' '.join(tokens)}",
                         path=path, line=number, field="header")
    if groups[4:7] != list(_GROUP_COLUMNS) or groups[7] != check:
        raise InputError("the in-place column group differs from the out-of-place one",
                         path=path, line=number, field="header")
    names = list(prefix) + [*groups[:4]] + [f"{g}_ip" for g in groups[4:]]
    return names


def _number(text: str, kind: type, where: dict[str, Any]) -> Any:
    try:
        value = kind(text)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise InputError(f"{text!r} is not {noun}", **where) from None
    if kind is float and not math.isfinite(value):
        raise InputError(f"{text!r} is not a finite number", **where)
    return value


def _check_failed(token: str, column: str, tolerance: float, where: dict[str, Any]) -> str | None:
    """Why a measurement's correctness field rejects it, or ``None`` if it passes."""
    if token.upper() == "N/A":
        return None  # validation disabled (-c 0): nothing to check
    if token.endswith("*"):
        return f"{column} {token} is flagged with an asterisk (over the threshold)"
    if column == "#wrong":
        wrong = _number(token, int, where)
        if wrong < 0:
            raise InputError(f"#wrong {wrong} is negative", **where)
        return f"#wrong = {wrong}" if wrong else None
    error = _number(token, float, where)
    if error < 0:
        raise InputError(f"error {token} is negative", **where)
    return f"error {token} exceeds tolerance {tolerance:g}" if error > tolerance else None


def _parse_group(
    cells: dict[str, str], suffix: str, size: int, in_place: int, number: int,
    options: Options, sink: WarningSink, path: Path,
) -> Measurement | None:
    """One of the two measurements of a row, or ``None`` if it is rejected."""
    values: dict[str, float] = {}
    for col in _GROUP_COLUMNS:
        name = col + suffix
        where = {"path": path, "line": number, "field": name}
        values[col] = _number(cells[name], float, where)
        if values[col] < 0:
            raise InputError(f"{cells[name]} is negative", **where)
    if values["time"] == 0:
        raise InputError("time is zero", path=path, line=number, field="time" + suffix)
    check = "#wrong" if "#wrong" + suffix in cells else "error"
    where = {"path": path, "line": number, "field": check + suffix}
    failed = _check_failed(cells[check + suffix], check, options.error_tolerance, where)
    if failed:
        kind = "in-place" if in_place else "out-of-place"
        sink.warn(f"{kind} measurement of size {size} rejected: {failed}", line=number)
        return None
    return Measurement(size, in_place, values["time"], values["algbw"], values["busbw"], number)


def _parse_row(
    text: str, number: int, columns: list[str], options: Options, sink: WarningSink,
    path: Path,
) -> list[Measurement]:
    """Parse one data row into its (up to two) accepted measurements."""
    tokens = text.split()
    if len(tokens) != len(columns):
        missing = columns[len(tokens)] if len(tokens) < len(columns) else None
        raise InputError(
            f"expected {len(columns)} fields ({' '.join(columns)}), found {len(tokens)}"
            + (" (truncated row?)" if len(tokens) < len(columns) else ""),
            path=path, line=number, field=missing,
        )
    cells = dict(zip(columns, tokens, strict=True))
    for name, token in cells.items():
        if "*" in token and not name.startswith(("error", "#wrong")):
            raise InputError(f"unexpected asterisk in {token!r}", path=path, line=number,
                             field=name)
    size = _number(cells["size"], int, {"path": path, "line": number, "field": "size"})
    if size <= 0:
        raise InputError(f"size {size} must be greater than zero", path=path, line=number,
                         field="size")
    _number(cells["count"], int, {"path": path, "line": number, "field": "count"})
    found = []
    for suffix, in_place in (("", 0), ("_ip", 1)):
        meas = _parse_group(cells, suffix, size, in_place, number, options, sink, path)
        if meas is not None:
            found.append(meas)
    return found


def _parse_table(
    lines: list[str], path: Path, options: Options, sink: WarningSink
) -> tuple[Header, list[Measurement], int]:
    """Walk the file: header lines, then the table. Returns header, measurements, rows."""
    header = Header()
    measurements: list[Measurement] = []
    sizes_seen: dict[int, int] = {}
    rows = 0
    for index, raw in enumerate(lines):
        number = index + 1
        text = _LAUNCHER_LABEL_RE.sub("", raw.strip(), count=1).strip()
        if not text:
            continue
        if header.columns is None:
            if text.startswith("#") and _is_column_header(text):
                header.columns = _parse_columns(text, number, path)
                header.columns_line = number
            else:
                _scan_header_line(text, number, header, path)
            continue
        if text.startswith("#"):
            _scan_header_line(text, number, header, path)
            continue
        first = text.split()[0]
        if not first.isdigit():
            raise InputError(f"unexpected text inside the table: {text[:60]!r}", path=path,
                             line=number, field="size")
        found = _parse_row(text, number, header.columns, options, sink, path)
        size = int(first)
        if size in sizes_seen:
            raise InputError(f"size {size} appears twice (first on line {sizes_seen[size]})",
                             path=path, line=number, field="size")
        sizes_seen[size] = number
        rows += 1
        measurements.extend(found)
    if header.columns is None:
        raise InputError("no nccl-tests column header ('# size count type ...') found",
                         path=path)
    if rows == 0:
        raise InputError("the table has no data rows", path=path,
                         line=header.columns_line)
    return header, measurements, rows


def _resolve_collective(header: Header, options: Options, sink: WarningSink,
                        path: Path) -> str:
    names = {name for name, _ in header.perf_names}
    if options.collective is not None:
        if options.collective not in COLLECTIVES:
            raise InputError(f"--collective {options.collective!r} is not one of "
                             f"{', '.join(COLLECTIVES)}", path=path, field="collective")
        if names and names != {options.collective}:
            sink.warn(f"--collective {options.collective} overrides the file's "
                      f"{', '.join(sorted(names))}")
        return options.collective
    if not names:
        raise InputError("the collective is not named in the file (no '*_perf' name); "
                         "pass --collective", path=path, field="collective")
    if len(names) > 1:
        raise InputError(f"the file names several collectives ({', '.join(sorted(names))}); "
                         "pass --collective", path=path, line=header.perf_names[0][1],
                         field="collective")
    name = names.pop()
    if name not in COLLECTIVES:
        raise InputError(f"collective {name!r} is not supported (one of "
                         f"{', '.join(COLLECTIVES)})", path=path,
                         line=header.perf_names[0][1], field="collective")
    return name


def _resolve_ranks(header: Header, options: Options, sink: WarningSink,
                   path: Path) -> tuple[int, int]:
    """World size and node count from the Rank lines and/or the flags."""
    file_world = len(header.ranks) or None
    file_nodes = len({host for host, _, _ in header.ranks.values()}) or None
    if file_world is not None and sorted(header.ranks) != list(range(file_world)):
        first = min(line for _, _, line in header.ranks.values())
        raise InputError(f"Rank lines are not 0..{file_world - 1}", path=path, line=first,
                         field="Rank")
    resolved = []
    for label, flag, found in (("world-size", options.world_size, file_world),
                               ("nodes", options.nodes, file_nodes)):
        if flag is not None:
            if found is not None and flag != found:
                sink.warn(f"--{label} {flag} overrides {found} read from the Rank lines")
            resolved.append(flag)
        elif found is not None:
            resolved.append(found)
        else:
            raise InputError(f"the header has no 'Rank N ... on HOST' lines, so {label} is "
                             f"unknown: pass --{label}", path=path, field=label)
    world, nodes = resolved
    if nodes > world:
        raise InputError(f"nodes ({nodes}) is larger than world size ({world})", path=path,
                         field="nodes")
    return world, nodes


def _rows(measurements: list[Measurement], collective: str, backend: str, world: int,
          nodes: int) -> list[dict[str, Any]]:
    return [
        {
            "collective": collective, "backend": backend, "algorithm": "default",
            "world_size": world, "nodes": nodes, "in_place": bool(m.in_place),
            "bytes": m.size, "time_s": m.time_us * 1e-6,
            "algbw_Bps": m.algbw_gbps * 1e9, "busbw_Bps": m.busbw_gbps * 1e9,
        }
        for m in measurements
    ]


def _noise_warnings(measurements: list[Measurement], sink: WarningSink) -> None:
    for in_place in (0, 1):
        series = sorted((m for m in measurements if m.in_place == in_place),
                        key=lambda m: m.size)
        label = "in-place" if in_place else "out-of-place"
        check_size_drops([m.size for m in series], [m.time_us * 1e-6 for m in series],
                         [m.line for m in series], sink, label)


def _notes(collective: str, header: Header, rows: int, kept: int) -> str:
    parts = [
        f"{rows} table rows -> {kept} measurements (out-of-place in_place=0, in-place "
        "in_place=1); time_s = nccl-tests 'time' (mean over the iterations) / 1e6; "
        "algbw_Bps/busbw_Bps = printed GB/s x 1e9 (printed with 2 decimals, so small "
        "sizes read 0).",
        "world_size = number of 'Rank' lines, nodes = distinct host names (unless given "
        "by flags).",
    ]
    if collective == "all_gather":
        parts.append("all_gather: bytes is nccl-tests 'size', the total gathered output "
                     "per rank (count x element size x ranks).")
    return " ".join(parts)


def _with_note(notes: str, note: str | None) -> str:
    return f"{notes} {note}" if note else notes


def import_nccl_tests(path: str | Path, options: Options | None = None) -> ImportResult:
    """Parse one nccl-tests / rccl-tests log into a validated :class:`CommTrace`."""
    options = options or Options()
    path = Path(path)
    lines = read_lines(path)
    sink = WarningSink(path)
    header, measurements, rows = _parse_table(lines, path, options, sink)
    if not measurements:
        raise InputError("every measurement was rejected (see the warnings)", path=path)
    collective = _resolve_collective(header, options, sink, path)
    world, nodes = _resolve_ranks(header, options, sink, path)
    backend = options.backend or ("rccl" if header.rccl else "nccl")
    _noise_warnings(measurements, sink)
    prov = read_provenance(lines)
    source = options.source or prov.source
    hardware = options.hardware or prov.setup
    if not source or not hardware:
        raise InputError("no '# source:' / '# setup:' provenance header; pass --source and "
                         "--hardware", path=path, field="source" if not source else "hardware")
    models = sorted({model for _, model, _ in header.ranks.values() if model})
    software: dict[str, Any] = {"benchmark": "rccl-tests" if header.rccl else "nccl-tests"}
    if header.version:
        software["version"] = header.version
    extra: dict[str, Any] = {
        "iterations": header.iterations,
        "devices": models,
        "n_gpus_per_process": header.n_gpus,
    }
    meta = comm_meta(importer=NAME, path=path, warnings=sink, facts=CommFacts(
        source=source, hardware=hardware, statistic="mean", software=software,
        notes=_with_note(_notes(collective, header, rows, len(measurements)), options.note),
        interconnect=options.interconnect, extra=extra))
    trace = build_comm_trace(_rows(measurements, collective, backend, world, nodes), meta)
    return ImportResult(comm=trace, warnings=list(sink.items))
