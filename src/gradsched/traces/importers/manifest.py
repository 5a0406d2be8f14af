"""The import manifest: which external file goes through which importer, with which flags.

``traces/manifest.yaml`` lists every shared external file (paths relative to the external
folder, never absolute) with its importer, the importer's options and the output path(s)
relative to the output folder::

    version: 1
    files:
      - file: nccl-tests/abci-inter-anode-2.txt
        importer: nccl-tests
        out: comm/external/nccl-abci-inter-anode-2.csv
        args: {interconnect: "4x InfiniBand HDR-200 per node"}
      - file: bcaffe-googlenet/tmp2comm.log
        importer: bcaffe
        out: compute/bcaffe/googlenet-tmp2comm.csv
        comm_out: comm/external/bcaffe-tmp2comm.csv
        args: {world_size: 2, nodes: 2}

``gradsched import manifest traces/manifest.yaml --src DIR -o traces`` re-imports them all.

A second list, ``captured``, names the traces we measured ourselves (``gradsched capture``),
committed as written and never re-imported, with their provenance (machine, software, code
commit, date, command, raw folder); :func:`load_captured` checks it.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from gradsched.errors import InputError
from gradsched.io import read_yaml
from gradsched.traces.importers import (
    ImportResult,
    bcaffe,
    kineto_gpu,
    nccl_tests,
    osu,
    pipedream,
    sailor,
    source_named,
)

IMPORTERS: dict[str, tuple[Callable[..., ImportResult], type]] = {
    "nccl-tests": (nccl_tests.import_nccl_tests, nccl_tests.Options),
    "osu": (osu.import_osu, osu.Options),
    "bcaffe": (bcaffe.import_bcaffe, bcaffe.Options),
    "pipedream": (pipedream.import_pipedream, pipedream.Options),
    "sailor": (sailor.import_sailor, sailor.Options),
}
# Kineto GPU traces: compute trace to `out`, the step's NCCL collectives to `comm_out`.
IMPORTERS["kineto-gpu"] = (kineto_gpu.import_kineto_gpu, kineto_gpu.Options)
_COMM_OUT = {"bcaffe", "kineto-gpu"}

_ENTRY_KEYS = {"file", "importer", "out", "comm_out", "args"}


@dataclass(frozen=True)
class Entry:
    """One manifest entry."""

    file: str
    importer: str
    out: str
    comm_out: str | None = None
    args: dict[str, Any] = field(default_factory=dict)


def _relative(value: Any, path: Path, index: int, name: str) -> str:
    """A relative POSIX path without ``..``; anything else is an error."""
    where = {"path": path, "row": index + 1, "field": f"files[{index}].{name}"}
    if not isinstance(value, str) or not value:
        raise InputError("must be a non-empty relative path", **where)
    pure = PurePosixPath(value)
    if pure.is_absolute() or ".." in pure.parts or "\\" in value:
        raise InputError(f"{value!r} must be relative to its folder (no '/', '..' or '\\' "
                         "at the start)", **where)
    return value


def _options(importer: str, args: Any, path: Path, index: int) -> dict[str, Any]:
    where = {"path": path, "row": index + 1, "field": f"files[{index}].args"}
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise InputError("args must be a mapping", **where)
    options_cls = IMPORTERS[importer][1]
    known = {f.name for f in dataclasses.fields(options_cls)}
    for key in args:
        if key not in known:
            raise InputError(f"unknown option {key!r} for importer {importer} (known: "
                             f"{', '.join(sorted(known))})", **where)
    types = {f.name: str(f.type) for f in dataclasses.fields(options_cls)}
    for key, value in args.items():
        expected = _OPTION_TYPES.get(types[key].replace(" ", ""))
        if expected is not None and not _is_a(value, expected):
            raise InputError(f"option {key!r} needs {types[key]}, got {value!r}",
                             path=path, row=index + 1, field=f"files[{index}].args.{key}")
    try:
        options_cls(**args)
    except TypeError as exc:
        raise InputError(str(exc), **where) from None
    return dict(args)


_OPTION_TYPES: dict[str, tuple[str, ...]] = {
    "int": ("int",), "int|None": ("int", "None"), "float": ("float",),
    "float|None": ("float", "None"), "str": ("str",), "str|None": ("str", "None"),
    "bool": ("bool",)}
"""The importer option annotations checked (others are left to the importer)."""


def _is_a(value: Any, kinds: tuple[str, ...]) -> bool:
    """``value`` is one of ``kinds`` (a bool is no number; an int is a float)."""
    if value is None:
        return "None" in kinds
    if isinstance(value, bool):
        return "bool" in kinds
    if isinstance(value, int):
        return "int" in kinds or "float" in kinds
    if isinstance(value, float):
        return "float" in kinds and math.isfinite(value)
    return isinstance(value, str) and "str" in kinds


def _entry(raw: Any, path: Path, index: int) -> Entry:
    where = {"path": path, "row": index + 1}
    if not isinstance(raw, dict):
        raise InputError("each entry must be a mapping", field=f"files[{index}]", **where)
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(sorted(unknown))}",
                         field=f"files[{index}]", **where)
    importer = raw.get("importer")
    if importer not in IMPORTERS:
        raise InputError(f"importer {importer!r} is not one of {', '.join(IMPORTERS)}",
                         field=f"files[{index}].importer", **where)
    comm_out = raw.get("comm_out")
    if comm_out is not None and importer not in _COMM_OUT:
        raise InputError(f"comm_out is only for the {' and '.join(sorted(_COMM_OUT))} "
                         "importers",
                         field=f"files[{index}].comm_out", **where)
    return Entry(
        file=_relative(raw.get("file"), path, index, "file"),
        importer=importer,
        out=_relative(raw.get("out"), path, index, "out"),
        comm_out=_relative(comm_out, path, index, "comm_out") if comm_out else None,
        args=_options(importer, raw.get("args"), path, index),
    )


def load_manifest(path: str | Path) -> list[Entry]:
    """Read and check a manifest; errors name the manifest, the entry and the key."""
    path = Path(path)
    doc = read_yaml(path)  # missing, unreadable, not UTF-8 or not YAML: named
    if not isinstance(doc, dict) or doc.get("version") != 1 or "files" not in doc:
        raise InputError("expected a mapping with 'version: 1' and 'files:'", path=path)
    if not isinstance(doc["files"], list) or not doc["files"]:
        raise InputError("'files' must be a non-empty list", path=path, field="files")
    entries = [_entry(raw, path, i) for i, raw in enumerate(doc["files"])]
    outs: dict[str, int] = {}
    for i, entry in enumerate(entries):
        for out in filter(None, (entry.out, entry.comm_out)):
            key = os.path.normpath(out)  # same.csv, ./same.csv and a/../same.csv: one file
            if key in outs:
                raise InputError(f"output {out!r} is also written by entry {outs[key] + 1} "
                                 f"(both are {key!r})", path=path, row=i + 1,
                                 field=f"files[{i}].out")
            outs[key] = i
    return entries


def run_entry(entry: Entry, src: str | Path) -> ImportResult:
    """Import one entry's file from the external folder ``src``."""
    func, options_cls = IMPORTERS[entry.importer]
    args = dict(entry.args)
    if entry.importer == "bcaffe":
        args["with_comm"] = entry.comm_out is not None
    return func(Path(src) / entry.file, options_cls(**args))


def save_result(entry: Entry, result: ImportResult, out_dir: str | Path) -> list[Path]:
    """Write an entry's trace(s) under ``out_dir``; returns the CSV paths written."""
    out_dir = Path(out_dir)
    written = []
    if result.compute is not None:  # compute importers (bcaffe: plus an optional comm trace)
        result.compute.save(out_dir / entry.out)
        written.append(out_dir / entry.out)
        if entry.comm_out and result.comm is not None:
            result.comm.save(out_dir / entry.comm_out)
            written.append(out_dir / entry.comm_out)
        record = getattr(result, "comm_record", None)  # kineto-gpu: the step's collectives
        if entry.comm_out and record is not None:
            record.save(out_dir / entry.comm_out)
            written.append(out_dir / entry.comm_out)
    else:
        assert result.comm is not None
        result.comm.save(out_dir / entry.out)
        written.append(out_dir / entry.out)
    return written


def run_manifest(
    manifest: str | Path, src: str | Path, out_dir: str | Path
) -> Iterator[tuple[Entry, ImportResult, list[Path]]]:
    """Import every entry of ``manifest`` from ``src`` into ``out_dir`` (lazily, in order)."""
    entries = load_manifest(manifest)
    src = Path(src)
    if not src.is_dir():
        raise InputError("the external folder does not exist", path=src)
    for entry in entries:
        with source_named(src / entry.file):
            result = run_entry(entry, src)
        yield entry, result, save_result(entry, result, out_dir)


_CAPTURED_KEYS = {"trace", "method", "machine", "software", "code", "date", "command", "raw"}


def load_captured(path: str | Path, traces_dir: str | Path) -> list[dict[str, str]]:
    """The manifest's ``captured`` list: bundles we measured ourselves (committed as written,
    never re-imported). Each entry names an existing bundle under ``traces_dir`` and gives
    every key of ``_CAPTURED_KEYS``; every bundle in a folder holding a listed one must be
    listed (except derived ``-corrected`` bundles, whose sidecars name their raw capture)."""
    path = Path(path)
    doc = read_yaml(path)
    raw = doc.get("captured") if isinstance(doc, dict) else None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError("'captured' must be a list", path=path, field="captured")
    out: list[dict[str, str]] = []
    for i, item in enumerate(raw):
        where = {"path": path, "row": i + 1, "field": f"captured[{i}]"}
        if not isinstance(item, dict) or set(item) != _CAPTURED_KEYS:
            raise InputError(f"each entry needs exactly the keys {sorted(_CAPTURED_KEYS)}",
                             **where)
        trace = _relative(item["trace"], path, i, "trace")
        if not (Path(traces_dir) / trace).is_file():
            raise InputError(f"{trace!r} is not a committed trace", **where)
        out.append({k: str(v) for k, v in item.items()})
    listed = {e["trace"] for e in out}
    for folder in {str(PurePosixPath(t).parent) for t in listed}:
        for csv in sorted((Path(traces_dir) / folder).glob("*.csv")):
            rel = f"{folder}/{csv.name}"
            if rel not in listed and not csv.stem.endswith("-corrected"):
                raise InputError(f"{rel!r} is not listed under 'captured'", path=path,
                                 field="captured")
    return out
