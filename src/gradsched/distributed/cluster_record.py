"""Ownership records of emulated clusters: a cluster only ever removes what it created.

Before a cluster creates anything it claims a *record file*, ``<run dir>/clusters/
<prefix>.json`` (run dir ``/run/gradsched``, or ``$GRADSCHED_RUN_DIR``), created
exclusively (a second cluster of the same prefix is refused, never cleaned away). The record
lists the exact namespace names, the links inside each, the owner (pid and start time) and
the processes started in the cluster (pid and start time); each namespace's identity (its
nsfs inode) is added the moment it is created. This module reads, claims and rewrites
records, and removes what a record lists once its owner is gone (``gradsched cluster
clean``: :func:`clean_record`, :func:`clean_names`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gradsched.distributed.netns import ClusterError, namespace_inode, namespace_pids
from gradsched.distributed.processes import PID_MAX, kill_processes, still_running
from gradsched.errors import InputError
from gradsched.io import read_json, write_json_atomic
from gradsched.readback import count, mapping, sequence, text

RECORD_VERSION = 1
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def record_dir() -> Path:
    """Where cluster records live: ``$GRADSCHED_RUN_DIR/clusters`` (default ``/run/gradsched``)."""
    return Path(os.environ.get("GRADSCHED_RUN_DIR", "/run/gradsched")) / "clusters"


def record_path(prefix: str) -> Path:
    """The record file of the cluster with name prefix ``prefix``."""
    return record_dir() / f"{prefix}.json"


def load_record(path: str | Path) -> dict[str, Any]:
    """Read a record file through the input gate (:func:`gradsched.io.read_json`) and check
    every field it acts on (:func:`check_record`): a missing, unreadable or malformed one
    raises :class:`ClusterError` naming the file (and the field), and nothing is touched."""
    path = Path(path)
    if not path.is_file():
        raise ClusterError(f"{path}: no such cluster record")
    try:
        record = read_json(path)
        check_record(record, path)
    except InputError as exc:
        raise ClusterError(f"not a readable gradsched cluster record (version "
                           f"{RECORD_VERSION} with 'owner' and 'namespaces'): {exc}") from None
    return record


def _process(entry: Any, path: Path, field: str) -> None:
    """A recorded process: ``{"pid": N, "start_time": "digits" | null}``."""
    proc = mapping(entry, path, field)
    count(proc.get("pid"), path, f"{field}.pid", low=1, high=PID_MAX)
    start = text(proc.get("start_time"), path, f"{field}.start_time", optional=True)
    if start is not None and not (start.isascii() and start.isdigit()):
        raise InputError(f"{start[:40]!r} is not a start time (clock ticks since boot)",
                         path=path, field=f"{field}.start_time")


def check_record(record: dict[str, Any], path: Path) -> None:
    """What :func:`clean_record` and :func:`clean_names` act on, checked before they act:
    the version, the owner and every recorded process (a pid Linux can hand out, a start
    time of digits), and every namespace (a name ``ip netns`` takes, without a path
    separator; its inode a non-negative integer or null; its links strings)."""
    if record.get("version") != RECORD_VERSION:
        raise InputError(f"version {record.get('version')!r}, not {RECORD_VERSION}",
                         path=path, field="version")
    _process(record.get("owner"), path, "owner")
    for i, entry in enumerate(sequence(record.get("processes", []), path, "processes")):
        _process(entry, path, f"processes[{i}]")
    for name, entry in mapping(record.get("namespaces"), path, "namespaces").items():
        field = f"namespaces.{name}"
        if not _NAMESPACE_RE.match(name) or name in (".", ".."):
            raise InputError(f"{name[:60]!r} is not a namespace name gradsched creates",
                             path=path, field="namespaces")
        info = mapping(entry, path, field)
        count(info.get("inode"), path, f"{field}.inode", high=2**64 - 1, optional=True)
        for j, link in enumerate(sequence(info.get("links", []), path, f"{field}.links")):
            text(link, path, f"{field}.links[{j}]")


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Rewrite ``path`` atomically (temp file in the same folder, then rename)."""
    write_json_atomic(path, record)


def claim_record(path: Path, record: dict[str, Any]) -> None:
    """Create ``path`` holding ``record``, atomically and only if it does not exist.

    The complete file is written under a temporary name and hard-linked into place
    (``link`` fails if the name exists), so a reader never sees half a record and two
    clusters can never claim the same prefix.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.claim")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise ClusterError(_taken_message(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def owner_alive(record: dict[str, Any]) -> bool:
    """Whether the process that created the record's cluster still runs."""
    return still_running(record["owner"])


def _taken_message(path: Path) -> str:
    try:
        record = load_record(path)
    except ClusterError as exc:
        return f"the cluster prefix is taken: {exc}; remove that file by hand if it is stale"
    pid = record["owner"]["pid"]
    if owner_alive(record):
        return (f"the cluster prefix is in use by a running cluster (pid {pid}, record "
                f"{path}); choose another prefix")
    return (f"the cluster prefix is taken by leftovers of a run that was killed (pid {pid} "
            f"is gone); remove them with: gradsched cluster clean {path}")


def owned_namespaces(record: dict[str, Any], names: Iterable[str] | None = None) -> list[str]:
    """The record's namespaces (or ``names`` among them) that exist and are the ones it
    created: same nsfs inode. A namespace recorded as about to be created (no inode yet:
    the run died between ``ip netns add`` and the record update) counts only when no
    process runs inside it."""
    wanted = record["namespaces"] if names is None else names
    owned = []
    for name in wanted:
        entry = record["namespaces"].get(name)
        inode = namespace_inode(name)
        if entry is None or inode is None:
            continue
        if entry.get("inode") == inode or (entry.get("inode") is None and not namespace_pids(name)):
            owned.append(name)
    return owned


def remove_namespaces(processes: Sequence[dict[str, Any]], names: Sequence[str]) -> list[str]:
    """Kill ``processes`` (recorded ones) and what runs in ``names``, delete ``names``;
    return the failures."""
    kill_processes(processes, names)
    failed = []
    for name in names:
        out = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True,
                             timeout=20, check=False)
        if out.returncode != 0 and namespace_inode(name) is not None:
            failed.append(f"{name}: {out.stderr.strip()}")
    return failed


def find_records() -> list[tuple[Path, dict[str, Any] | None]]:
    """Every record file (sorted), with its content (None when unreadable)."""
    found: list[tuple[Path, dict[str, Any] | None]] = []
    for path in sorted(record_dir().glob("*.json")):
        try:
            found.append((path, load_record(path)))
        except ClusterError:
            found.append((path, None))
    return found


def clean_record(path: str | Path) -> list[str]:
    """Remove what the record ``path`` lists (its owner must be gone); return the
    namespaces removed. Only namespaces whose identity matches the record are deleted and
    only the recorded processes and those inside them are killed; the record goes last."""
    path = Path(path)
    record = load_record(path)
    if owner_alive(record):
        raise ClusterError(f"{path}: its cluster is still running (pid "
                           f"{record['owner']['pid']}); stop that process instead")
    names = owned_namespaces(record)
    failed = remove_namespaces(record.get("processes", []), names)
    if failed:
        raise ClusterError(f"{path}: could not remove " + "; ".join(failed))
    unverified = [n for n, e in record["namespaces"].items()
                  if e.get("inode") is None and n not in names and namespace_inode(n) is not None]
    if unverified:  # keep the record: these may still be ours
        raise ClusterError(f"{path}: {', '.join(unverified)} exist, but the run died before "
                           "recording their identity and processes run inside them, so "
                           "they were not removed (inspect them with 'ip netns pids NAME')")
    path.unlink(missing_ok=True)
    return names


def clean_names(names: Sequence[str]) -> list[str]:
    """Remove exactly the namespaces ``names``, each of which must be listed in the record
    of a cluster whose owner is gone; return the ones removed (all or an error, before
    anything is touched)."""
    by_record: dict[Path, tuple[dict[str, Any], list[str]]] = {}
    records = [(p, r) for p, r in find_records() if r is not None]
    for name in names:
        hits = [(p, r) for p, r in records if name in r["namespaces"]]
        if not hits:
            raise ClusterError(f"namespace {name!r}: no gradsched cluster record in "
                               f"{record_dir()} lists it, so gradsched did not create it; "
                               "nothing was removed")
        path, record = hits[0]
        if owner_alive(record):
            raise ClusterError(f"namespace {name!r} belongs to a running cluster (pid "
                               f"{record['owner']['pid']}, record {path}); nothing was removed")
        by_record.setdefault(path, (record, []))[1].append(name)
    removed: list[str] = []
    for path, (record, wanted) in by_record.items():
        owned = owned_namespaces(record, wanted)
        failed = remove_namespaces([], owned)
        if failed:
            raise ClusterError(f"{path}: could not remove " + "; ".join(failed))
        removed.extend(owned)
        for name in wanted:
            record["namespaces"].pop(name, None)
        if record["namespaces"]:
            write_record(path, record)
        else:
            path.unlink(missing_ok=True)
    return removed


def note_leftovers() -> None:
    """Say on stderr (once per cluster) which records of killed runs still hold
    namespaces; they are never removed without being asked for."""
    stale = [str(p) for p, r in find_records()
             if r is not None and not owner_alive(r) and owned_namespaces(r)]
    if stale:
        print(f"cluster: note: {len(stale)} run(s) killed earlier left namespaces behind; "
              f"remove them with: gradsched cluster clean RECORD ({', '.join(stale)})",
              file=sys.stderr)


__all__ = ["RECORD_VERSION", "check_record", "claim_record", "clean_names", "clean_record",
           "find_records", "load_record", "note_leftovers", "owned_namespaces", "owner_alive",
           "record_dir", "record_path", "remove_namespaces", "write_record"]
