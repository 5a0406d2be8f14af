"""Import a PipeDream profiler ``graph.txt`` into a compute trace.

Source format (github.com/msr-fiddle/pipedream, commit 7db6a1c; written by
``graph/graph.py`` ``Node.__str__`` and read back by ``Graph.from_str``, graph.py:463-480
and 644-660): one line per leaf ``nn.Module``::

    nodeN -- <module repr> -- forward_compute_time=<ms>, backward_compute_time=<ms>, \
activation_size=<bytes or [b; b; ...]>, parameter_size=<bytes>

then the DAG's edges as tab-indented ``nodeA -- nodeB`` lines. The profiler times each leaf
module's forward and backward between ``torch.cuda.synchronize()`` calls
(``profiler/torchmodules/torchprofiler/profiling.py:128-163``) and averages 100 minibatches
(``profiler/image_classification/main.py:328``, ``translation/seq2seq/train/trainer.py:218``);
sizes are 4 bytes x element count (``torchgraph/graph_creator.py:35-41``), so
``parameter_size`` is fp32 bytes of all parameters of the module (weight + bias together).

Rules (see ``traces/README.md``):

* Module order = a topological order of the DAG (Kahn's algorithm; among ready modules the
  smallest node number first, only as a tie-break). The file's line order is NOT execution
  order (``node11`` precedes ``node10``); the node numbers (creation order,
  ``graph_creator.py``) respect every edge in the 14 shipped files, so the tie-break keeps
  the order in which the traced forward created the modules.
* ``Input`` nodes (``Input``, ``Input0``, ...) are dropped: their forward time is data loading
  (main.py:280-283). Their count and time go into the metadata.
* One gradient row per module with ``parameter_size > 0`` (weight, bias and any other
  parameter of the module are ONE row), named ``<nodeN>.<ModuleClass>``, rows in DAG order.
* ``backward_s`` is incremental: walking the modules in reverse DAG order, a row carries its
  module's backward time plus that of the parameterless modules after it (which run before
  it in backward) since the previous gradient row. Parameterless modules before the first
  row (backward time spent after the last gradient is ready) are added to the last-ready row
  (with a warning when not zero) so that the rows sum to the file's total backward time.
  ``forward_s`` likewise in DAG order: a row carries its module's forward plus the
  parameterless modules between the previous row and it; modules after the last row go to
  the last row.
* Batch size: image models -- the Input node's ``activation_size`` = 3 x S x S x 4 x batch
  (S = ``image_size``, default 224; 299 for Inception v3). Models without an image Input
  (GNMT: the Input nodes have size 0) -- each ``LSTM(in, hidden, ...)`` module's outputs
  are ``[output; h; c]`` and ``h`` is 4 x directions x hidden x batch bytes; every LSTM
  must give the same batch. ``batch_size`` (a flag) is used only when neither rule applies,
  and is an error when it contradicts the recovered value.
* The GPU is not named in the repository: ``device`` says so.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.importers import IMPORTER_VERSION, ImportResult, WarningSink, read_lines
from gradsched.traces.validate import strict_float

NAME = "pipedream"
FIELDS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")
DEVICE_NOT_STATED = "not stated by the source"
DEFAULT_SOURCE = "github.com/msr-fiddle/pipedream profiler output ({rel})"
_NODE_RE = re.compile(r"^(?P<id>node(?P<num>\d+)) -- (?P<desc>.*?) -- (?P<meta>[a-z_]+=.*)$")
_EDGE_RE = re.compile(r"^\t(?P<a>\S+) -- (?P<b>\S+)$")
_INPUT_RE = re.compile(r"^Input\d*$")
_LSTM_RE = re.compile(r"^LSTM\((?P<inp>\d+), (?P<hidden>\d+)(?P<rest>.*)\)$")
_BYTES_PER_PARAM = 4
_RATIO_LOW = 1.0
_RATIO_HIGH = 3.5


@dataclass
class Options:
    """Knobs of the PipeDream importer (the manifest passes ``model`` and the source text)."""

    model: str | None = None  # default: the graph.txt's folder name
    image_size: int = 224
    batch_size: int | None = None  # only when the file does not imply one
    device: str = DEVICE_NOT_STATED
    source: str | None = None
    date: str = "not recorded by the source"
    note: str | None = None


@dataclass(frozen=True)
class Module:
    """One node line of graph.txt (times in ms, sizes in bytes, as in the file)."""

    node_id: str
    number: int
    desc: str
    forward_ms: float
    backward_ms: float
    activation: tuple[float, ...]
    parameter_bytes: float
    line: int

    @property
    def kind(self) -> str:
        """The module class, from the repr (``Conv2d(3, 64, ...)`` -> ``Conv2d``)."""
        return re.split(r"[(\s]", self.desc, maxsplit=1)[0] or "Module"

    @property
    def is_input(self) -> bool:
        return bool(_INPUT_RE.match(self.desc))


def _number(text: str, name: str, path: Path, line: int) -> float:
    try:
        value = strict_float(text)
    except ValueError:
        raise InputError(f"{text!r} is not a number", path=path, line=line, field=name) from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{text!r} must be a finite number >= 0", path=path, line=line,
                         field=name)
    return value


def _parse_meta(text: str, path: Path, line: int) -> dict[str, Any]:
    """``k=v, k=v, ...`` in the fixed order of :data:`FIELDS`; lists as ``[a; b]``."""
    parts = text.split(", ")
    values: dict[str, Any] = {}
    for i, name in enumerate(FIELDS):
        if i >= len(parts) or "=" not in parts[i]:
            raise InputError(f"missing '{name}=' (a truncated line?)", path=path, line=line,
                             field=name)
        key, value = parts[i].split("=", 1)
        if key != name:
            raise InputError(f"expected '{name}=', found '{key}='", path=path, line=line,
                             field=name)
        if name == "activation_size" and value.startswith("["):
            if not value.endswith("]"):
                raise InputError("unterminated list", path=path, line=line, field=name)
            items = value[1:-1].split("; ")
            values[name] = tuple(_number(v, name, path, line) for v in items)
        else:
            number = _number(value, name, path, line)
            values[name] = (number,) if name == "activation_size" else number
    if len(parts) > len(FIELDS):
        raise InputError(f"unexpected text after parameter_size: {', '.join(parts[4:])!r}",
                         path=path, line=line, field="parameter_size")
    return values


def _parse(path: Path) -> tuple[dict[str, Module], list[tuple[str, str, int]]]:
    """Node lines and edge lines (with their 1-based line numbers)."""
    modules: dict[str, Module] = {}
    edges: list[tuple[str, str, int]] = []
    for number, raw in enumerate(read_lines(path), start=1):
        if not raw.strip():
            continue
        if raw.startswith("\t"):
            match = _EDGE_RE.match(raw.rstrip())
            if not match:
                raise InputError("not an edge line '\\tnodeA -- nodeB'", path=path,
                                 line=number, field="edge")
            edges.append((match.group("a"), match.group("b"), number))
            continue
        match = _NODE_RE.match(raw.rstrip())
        if not match:
            raise InputError("not a node line 'nodeN -- <module> -- forward_compute_time=...'",
                             path=path, line=number, field="node")
        if edges:
            raise InputError("a node line after the edge lines", path=path, line=number,
                             field="node")
        node_id = match.group("id")
        if node_id in modules:
            raise InputError(f"{node_id} is defined twice (first on line "
                             f"{modules[node_id].line})", path=path, line=number, field="node")
        meta = _parse_meta(match.group("meta"), path, number)
        modules[node_id] = Module(
            node_id, int(match.group("num")), match.group("desc").strip(),
            meta["forward_compute_time"], meta["backward_compute_time"],
            meta["activation_size"], meta["parameter_size"], number)
    if not modules:
        raise InputError("no node lines", path=path)
    return modules, edges


def _adjacency(modules: dict[str, Module], edges: list[tuple[str, str, int]], path: Path,
               sink: WarningSink) -> dict[str, dict[str, int]]:
    """node -> {successor: edge line}; checks names, duplicates and isolated nodes."""
    succ: dict[str, dict[str, int]] = {n: {} for n in modules}
    for a, b, line in edges:
        for end in (a, b):
            if end not in modules:
                raise InputError(f"edge names {end}, which has no node line (a truncated "
                                 "file?)", path=path, line=line, field="edge")
        if a == b:
            raise InputError(f"the edges form a cycle: {a} -> {a}", path=path, line=line,
                             field="edge")
        if b in succ[a]:
            sink.warn(f"edge {a} -- {b} repeats line {succ[a][b]}; counted once", line=line)
            continue
        succ[a][b] = line
    touched = {a for a, _, _ in edges} | {b for _, b, _ in edges}
    if len(modules) > 1:
        for node in modules.values():
            if node.node_id not in touched:
                raise InputError(f"{node.node_id} has no edge (a truncated edge list?)",
                                 path=path, line=node.line, field="edge")
    return succ


def _cycle(remaining: set[str], succ: dict[str, dict[str, int]]) -> list[str]:
    """One cycle among ``remaining`` (every node there has a predecessor there)."""
    pred = {n: sorted(a for a in remaining if n in succ[a]) for n in remaining}
    node = min(remaining, key=lambda n: int(n[4:]))
    seen: list[str] = []
    while node not in seen:
        seen.append(node)
        node = pred[node][0]
    cycle = seen[seen.index(node):][::-1]  # predecessors walked back -> edge direction
    start = cycle.index(min(cycle, key=lambda n: int(n[4:])))
    return cycle[start:] + cycle[:start]


def topological_order(modules: dict[str, Module], succ: dict[str, dict[str, int]],
                      path: Path) -> list[Module]:
    """Kahn's algorithm; ties broken by the smaller node number. A cycle is an error."""
    indegree = {n: 0 for n in modules}
    for targets in succ.values():
        for b in targets:
            indegree[b] += 1
    ready = [(modules[n].number, n) for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order: list[Module] = []
    while ready:
        _, node = heapq.heappop(ready)
        order.append(modules[node])
        for b in succ[node]:
            indegree[b] -= 1
            if indegree[b] == 0:
                heapq.heappush(ready, (modules[b].number, b))
    if len(order) != len(modules):
        cycle = _cycle({n for n, d in indegree.items() if d > 0}, succ)
        line = succ[cycle[0]][cycle[1 % len(cycle)]]
        raise InputError("the edges form a cycle: " + " -> ".join(cycle + cycle[:1]),
                         path=path, line=line, field="edge")
    return order


@dataclass(frozen=True)
class Batch:
    """The recovered batch size and how."""

    size: int
    rule: str


def _image_batch(inputs: list[Module], options: Options, path: Path) -> Batch | None:
    sized = [m for m in inputs if sum(m.activation) > 0]
    if not sized:
        return None
    if len(sized) > 1 or len(sized[0].activation) != 1:
        raise InputError("several sized Input nodes: pass batch_size", path=path,
                         line=sized[0].line, field="activation_size")
    node, side = sized[0], options.image_size
    per_sample = 3 * side * side * _BYTES_PER_PARAM
    batch = node.activation[0] / per_sample
    if batch < 1 or batch != int(batch):
        raise InputError(f"Input activation_size {node.activation[0]:.0f} B is not a multiple "
                         f"of 3 x {side} x {side} x 4 B (set image_size)", path=path,
                         line=node.line, field="activation_size")
    return Batch(int(batch), f"Input node {node.node_id} (line {node.line}) activation_size "
                 f"{node.activation[0]:.0f} B = 3 x {side} x {side} x 4 B x batch")


def _lstm_batch(order: list[Module], path: Path) -> Batch | None:
    found: list[tuple[Module, int, int]] = []
    for m in order:
        match = _LSTM_RE.match(m.desc)
        if not match or len(m.activation) < 3:
            continue
        dirs = 2 if "bidirectional=True" in match.group("rest") else 1
        hidden = int(match.group("hidden"))
        batch = m.activation[1] / (_BYTES_PER_PARAM * dirs * hidden)
        seq = m.activation[0] / (_BYTES_PER_PARAM * dirs * hidden * batch) if batch else 0
        if batch < 1 or batch != int(batch) or seq != int(seq):
            raise InputError(f"LSTM hidden-state size {m.activation[1]:.0f} B is not 4 x "
                             f"{dirs} x {hidden} x batch", path=path, line=m.line,
                             field="activation_size")
        found.append((m, int(batch), int(seq)))
    if not found:
        return None
    batches = {b for _, b, _ in found}
    if len(batches) > 1:
        raise InputError(f"the LSTM modules imply different batch sizes {sorted(batches)}",
                         path=path, line=found[0][0].line, field="activation_size")
    first = found[0]
    return Batch(first[1], f"LSTM hidden state h = 4 x hidden x batch bytes (the second "
                 f"output of every one of the {len(found)} LSTM modules, e.g. "
                 f"{first[0].node_id} line {first[0].line}: {first[0].activation[1]:.0f} B; "
                 f"its output, {first[0].activation[0]:.0f} B, implies sequence length "
                 f"{first[2]}); the Input nodes carry no size")


def recover_batch(inputs: list[Module], order: list[Module], options: Options,
                  path: Path) -> Batch:
    """Batch size from the activation sizes (see the module docstring)."""
    found = _image_batch(inputs, options, path) or _lstm_batch(order, path)
    if found is None:
        if options.batch_size is None:
            raise InputError("the batch size does not follow from the activation sizes (no "
                             "sized Input node, no LSTM): pass batch_size", path=path,
                             field="activation_size")
        return Batch(options.batch_size, "given by the batch_size flag (not recoverable "
                     "from the file)")
    if options.batch_size is not None and options.batch_size != found.size:
        raise InputError(f"batch_size {options.batch_size} contradicts the file, which "
                         f"implies {found.size} ({found.rule})", path=path,
                         field="batch_size")
    return found


def _attribute(order: list[Module], times: list[float]) -> tuple[list[float], float]:
    """Incremental times on parameterised modules, walking ``order``; leftover after the last."""
    rows: list[float] = []
    acc = 0.0
    for module, t in zip(order, times, strict=True):
        acc += t
        if module.parameter_bytes > 0:
            rows.append(acc)
            acc = 0.0
    return rows, acc


@dataclass(frozen=True)
class Split:
    """Per-row forward/backward seconds and what was folded into the end rows."""

    forward_s: list[float]
    backward_s: list[float]  # in forward (row) order
    forward_tail_s: float
    backward_tail_s: float


def split_times(order: list[Module]) -> Split:
    """Apply the incremental attribution rules to ``order`` (Input nodes removed)."""
    fwd, fwd_tail = _attribute(order, [m.forward_ms * 1e-3 for m in order])
    rev = order[::-1]
    bwd_rev, bwd_tail = _attribute(rev, [m.backward_ms * 1e-3 for m in rev])
    bwd = bwd_rev[::-1]
    if fwd:
        fwd[-1] += fwd_tail
        bwd[0] += bwd_tail
    return Split(fwd, bwd, fwd_tail, bwd_tail)


def _frame(rows: list[Module], split: Split, path: Path) -> pd.DataFrame:
    n = len(rows)
    records = []
    for k, m in enumerate(rows):
        numel = m.parameter_bytes / _BYTES_PER_PARAM
        if numel != int(numel):
            raise InputError(f"parameter_size {m.parameter_bytes:g} B is not a whole number "
                             "of fp32 values", path=path, line=m.line, field="parameter_size")
        records.append({"name": f"{m.node_id}.{m.kind}", "layer": k, "numel": int(numel),
                        "bytes": int(numel) * _BYTES_PER_PARAM,
                        "forward_s": split.forward_s[k], "backward_s": split.backward_s[k],
                        "ready_order": n - 1 - k})
    frame = pd.DataFrame(records)
    for col in ("forward_s", "backward_s"):
        frame[col] = frame[col].astype(np.float64)
    return frame


def _check_ratios(rows: list[Module], fwd_s: float, bwd_s: float, sink: WarningSink) -> None:
    """Warn about totals and modules whose backward/forward ratio looks off."""
    ratio = bwd_s / fwd_s if fwd_s > 0 else math.inf
    if not _RATIO_LOW <= ratio <= _RATIO_HIGH:
        sink.warn(f"total backward {bwd_s * 1e3:.3f} ms / total forward {fwd_s * 1e3:.3f} ms "
                  f"= {ratio:.2f}, outside [{_RATIO_LOW:g}, {_RATIO_HIGH:g}] (backward is "
                  "usually 1-3x forward; per-module synchronisation inflates small modules)")
    odd = sorted((m for m in rows if m.backward_ms < m.forward_ms),
                 key=lambda m: m.backward_ms / m.forward_ms if m.forward_ms else 1.0)
    if odd:
        worst = ", ".join(f"{m.node_id} {m.kind} line {m.line}: {m.backward_ms:g} vs "
                          f"{m.forward_ms:g} ms" for m in odd[:5])
        sink.warn(f"{len(odd)} of {len(rows)} modules with parameters have backward < "
                  f"forward (worst: {worst})", line=odd[0].line)


def _meta(path: Path, options: Options, ctx: dict[str, Any], sink: WarningSink) -> dict:
    rel = "/".join(path.parts[-3:])
    notes = (
        f"{ctx['n_modules']} module lines, {ctx['n_edges']} edges; modules ordered by a "
        "topological sort of the DAG (Kahn; ties -> smaller node number), not by node "
        f"number. {len(ctx['inputs'])} Input node(s) dropped ({', '.join(ctx['inputs'])}; "
        f"their forward time, {ctx['input_s'] * 1e3:.3f} ms, is data loading). One row "
        f"per module with parameters ({ctx['n_rows']} rows): the weight, bias and any other "
        "parameter of a module are ONE gradient row, named <nodeN>.<module class>; "
        "numel = parameter_size / 4 (PipeDream writes 4 B per parameter). backward_s: "
        "incremental in reverse DAG order -- each row holds its module's backward plus the "
        "parameterless modules between it and the previous gradient row "
        f"({ctx['bwd_tail'] * 1e3:.3f} ms of modules before the first row is added to the "
        "last-ready row); forward_s likewise in DAG order "
        f"({ctx['fwd_tail'] * 1e3:.3f} ms of modules after the last row is added to it). "
        f"Totals: forward {ctx['fwd_s'] * 1e3:.3f} ms, backward {ctx['bwd_s'] * 1e3:.3f} ms "
        f"(ratio {ctx['bwd_s'] / ctx['fwd_s']:.2f}), parameters {ctx['param_bytes']} B. "
        f"Batch size {ctx['batch'].size}: {ctx['batch'].rule}. "
        "Times are PipeDream's means over 100 profiled minibatches, each leaf module timed "
        "between torch.cuda.synchronize() calls (so small modules carry launch and sync "
        "overhead, and nothing overlaps). The GPU is not named in the repository (the "
        "PipeDream paper's experiments used V100s; that is not evidence for these files)."
    )
    if options.note:
        notes += " " + options.note
    return {
        "kind": "compute",
        "model": options.model or path.parent.name,
        "batch_size": ctx["batch"].size,
        "batch_size_rule": ctx["batch"].rule,
        "device": options.device,
        "dtype": "fp32",
        "world_size": 1,
        "software": {"framework": "PyTorch", "profiler": "PipeDream torchprofiler"},
        "capture_method": "PipeDream profiler: forward/backward hooks per leaf nn.Module "
                          "with torch.cuda.synchronize() (torchprofiler/profiling.py)",
        "iterations": 100,
        "date": options.date,
        "source": options.source or DEFAULT_SOURCE.format(rel=rel),
        "forward_measured": True,
        "forward_backward_s": ctx["fwd_s"] + ctx["bwd_s"],
        "rows": "one row per module with parameters; weight and bias of a module are one row",
        "original_file": rel,
        "importer": NAME,
        "importer_version": IMPORTER_VERSION,
        "warnings": sink.for_meta(),
        "notes": notes,
    }


def import_pipedream(path: str | Path, options: Options | None = None) -> ImportResult:
    """Parse a PipeDream ``graph.txt`` into a validated :class:`ComputeTrace`."""
    options = options or Options()
    path = Path(path)
    if options.image_size <= 0:
        raise InputError("image_size must be positive", path=path, field="image_size")
    sink = WarningSink(path)
    modules, edges = _parse(path)
    order = topological_order(modules, _adjacency(modules, edges, path, sink), path)
    inputs = [m for m in order if m.is_input]
    if not inputs:
        raise InputError("no Input node (not a PipeDream graph.txt?)", path=path, field="node")
    kept = [m for m in order if not m.is_input]
    rows = [m for m in kept if m.parameter_bytes > 0]
    if not rows:
        raise InputError("no module has parameters: nothing to all-reduce", path=path,
                         field="parameter_size")
    bwd_total = sum(m.backward_ms for m in kept) * 1e-3
    if bwd_total <= 0:
        raise InputError("every backward_compute_time is 0: the file has no backward",
                         path=path, field="backward_compute_time")
    batch = recover_batch(inputs, kept, options, path)
    split = split_times(kept)
    if split.backward_tail_s > 0:
        sink.warn(f"{split.backward_tail_s * 1e3:.3f} ms of backward in parameterless modules "
                  "before the first module with parameters is added to the last-ready row")
    fwd_total = sum(m.forward_ms for m in kept) * 1e-3
    _check_ratios(rows, fwd_total, bwd_total, sink)
    ctx = {"n_modules": len(modules), "n_edges": len(edges), "n_rows": len(rows),
           "inputs": [m.node_id for m in inputs],
           "input_s": sum(m.forward_ms for m in inputs) * 1e-3,
           "fwd_s": fwd_total, "bwd_s": bwd_total, "fwd_tail": split.forward_tail_s,
           "bwd_tail": split.backward_tail_s, "batch": batch,
           "param_bytes": int(sum(m.parameter_bytes for m in rows))}
    frame = _frame(rows, split, path)
    compute = ComputeTrace.from_frame(frame, _meta(path, options, ctx, sink))
    return ImportResult(compute=compute, warnings=list(sink.items))
