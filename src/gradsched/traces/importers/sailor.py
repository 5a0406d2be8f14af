"""Import a Sailor per-layer profile (``profile.json``) into a compute trace.

Source: github.com/eth-easl/sailor, commit cf2c8e3,
``sailor/Planner/sailor_planner/profiles/<model>/<GPU>/profile.json``. Layout, as Sailor's
planner reads it (``cpp_src/utils/read_json.cpp:132-157``, ``cpp_src/training.cpp:27-40``)::

    {micro_batch: {tensor_parallel: {layer_index: [forward_s, backward_s, update_s]}}}

Layer 0 is the embedding, the last index the output head, the ones between the transformer
layers: 26 entries for OPT-350 (24 layers), 34 for GPT-Neo-2.7 (32), as in Sailor's
``training_config_*.json`` (``num_all_layers``) and ``llm_info.json``. The planner takes
forward and backward per layer and ONE update time, the maximum over layers
(training.cpp:39); every file repeats the same update value on every layer. Sailor's
profiler times a few transformer layers and copies the rest (``docs/PROFILING.md:2``).

Rules (see ``traces/README.md``):

* One row per layer (embedding, transformer layers, head) in forward order, named
  ``layerKK.embedding|transformer|head``; ``forward_s`` / ``backward_s`` = the profile's
  values for the chosen (micro-batch, tensor-parallel) pair; layers run one after another,
  so the incremental ``backward_s`` is the layer's own; ``ready_order`` = n-1-k.
  ``update_s`` is not written (0): the file's update is one per-model number, kept in the
  sidecar as ``profile_update_s``.
* Parameter counts come from the public model configurations (:data:`MODELS`) by
  :func:`layer_params` (formula there), per tensor-parallel rank, fp32 (4 B each).
* Sequence length: 2048 (Sailor's ``training_config_opt_350.json`` /
  ``training_config_gpt_neo27.json`` state it; the profile does not). ``batch_size`` in the
  sidecar is the micro-batch (sequences per GPU).
* Duplicates: every ``profile.json`` beside this one (``<root>/<model>/<GPU>/``) is hashed
  on its parsed content; a file whose numbers equal another's is warned about (and named in
  ``duplicate_of``). A profile whose layer count does not fit the model is an error.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_json
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.importers import IMPORTER_VERSION, ImportResult, WarningSink

NAME = "sailor"
BYTES_PER_PARAM = 4
DEFAULT_SEQUENCE_LENGTH = 2048
DEFAULT_SOURCE = ("github.com/eth-easl/sailor, commit cf2c8e3cc53ce178fe58a4003f46b4b6b848fc33, "
                  "sailor/Planner/sailor_planner/profiles/{rel} (MIT)")
GPUS = {
    "A100-40": "NVIDIA A100 40GB",
    "A100-80": "NVIDIA A100 80GB",
    "GH-96": "NVIDIA GH200 (96 GB)",
    "V100-16": "NVIDIA V100 16GB",
    "RTX-2080": "NVIDIA GeForce RTX 2080",
    "RTX-3090": "NVIDIA GeForce RTX 3090",
    "Titan-RTX": "NVIDIA Titan RTX",
}


@dataclass(frozen=True)
class ModelConfig:
    """The public configuration of a decoder-only transformer (what the counts need)."""

    name: str
    hidden: int
    layers: int
    ffn: int
    vocab: int
    positions: int  # rows of the learned position table
    embed_proj_dim: int | None  # OPT-350M: token embeddings of width 512, projected in/out
    qkv_bias: bool
    final_layer_norm: bool
    tied_embeddings: bool  # the head reuses the token embedding matrix


MODELS: dict[str, ModelConfig] = {
    # facebook/opt-350m config.json: hidden_size 1024, 24 layers, ffn_dim 4096, vocab 50272,
    # max_position_embeddings 2048 (+2: OPTLearnedPositionalEmbedding's offset),
    # word_embed_proj_dim 512, do_layer_norm_before false (no final layer norm), tied head.
    "OPT-350": ModelConfig("OPT-350M", 1024, 24, 4096, 50272, 2048 + 2, 512, True, False, True),
    # EleutherAI/gpt-neo-2.7B config.json: hidden_size 2560, 32 layers, intermediate 4 x 2560,
    # vocab 50257, max_position_embeddings 2048; q/k/v without bias; final ln_f; tied head.
    "GPT-Neo-2.7": ModelConfig("GPT-Neo-2.7B", 2560, 32, 10240, 50257, 2048, None, False, True,
                               True),
}


def layer_params(config: ModelConfig, kind: str, tp: int = 1) -> int:
    """Parameters of one layer held by one tensor-parallel rank (Megatron split).

    With h = hidden, f = ffn, V = vocab, P = position rows, E = embedding width
    (``embed_proj_dim`` or h), t = tensor-parallel degree:

    * transformer: attention q,k,v ``3h^2/t`` (+ ``3h/t`` biases if any), output projection
      ``h^2/t + h``; MLP ``hf/t + f/t`` and ``fh/t + h``; two LayerNorms ``4h``. At t = 1:
      ``4h^2 + 2hf + f + 6h (+3h)`` -- OPT-350M 12,596,224, GPT-Neo-2.7B 78,668,800.
    * embedding: token table ``ceil(V / t) E`` (vocab-parallel) + positions ``P h`` (+ ``E h``
      project_in). The tied head reuses the token table, whose gradient is complete only
      after the embedding's backward: it belongs to this row.
    * head: final LayerNorm ``2h`` (if any) + project_out ``h E`` (if any) + an untied
      vocabulary projection ``ceil(V / t) E`` (if not tied).

    Sums at t = 1: OPT-350M 331,196,416 and GPT-Neo-2.7B 2,651,307,520 parameters.
    """
    h, f, t = config.hidden, config.ffn, tp
    width = config.embed_proj_dim or h
    proj = width * h if config.embed_proj_dim else 0
    if kind == "transformer":
        qkv = 3 * h * h // t + (3 * h // t if config.qkv_bias else 0)
        return qkv + h * h // t + h + h * f // t + f // t + f * h // t + h + 4 * h
    if kind == "embedding":
        return math.ceil(config.vocab / t) * width + config.positions * h + proj
    if kind == "head":
        head = 0 if config.tied_embeddings else math.ceil(config.vocab / t) * width
        return (2 * h if config.final_layer_norm else 0) + proj + head
    raise ValueError(f"unknown layer kind {kind!r}")


@dataclass
class Options:
    """Knobs of the Sailor importer (model and GPU default to the folder names)."""

    model: str | None = None  # a key of MODELS; default: the file's grandparent folder
    gpu: str | None = None  # Sailor's GPU label; default: the file's parent folder
    micro_batch: int = 1
    tensor_parallel: int = 1
    sequence_length: int = DEFAULT_SEQUENCE_LENGTH
    device: str | None = None
    source: str | None = None
    check_duplicates: bool = True
    note: str | None = None


def _load(path: Path) -> dict[str, Any]:
    doc = read_json(path, kind=None)
    if not isinstance(doc, dict) or not doc:
        raise InputError("expected {micro_batch: {tensor_parallel: {layer: [f, b, u]}}}",
                         path=path)
    return doc


def content_hash(doc: dict[str, Any]) -> str:
    """SHA-256 of the parsed numbers (key order and whitespace do not matter)."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def find_duplicates(path: Path, doc: dict[str, Any]) -> list[str]:
    """Other ``profile.json`` files under ``<root>/<model>/<GPU>/`` with the same numbers."""
    root = path.resolve().parents[2]
    mine = content_hash(doc)
    same = []
    for other in sorted(root.glob("*/*/profile.json")):
        if other.resolve() == path.resolve():
            continue
        try:
            if content_hash(read_json(other, kind=None)) == mine:
                same.append(str(other.relative_to(root)))
        except InputError:
            continue
    return same


def _key_list(mapping: dict[str, Any]) -> str:
    """The keys of ``mapping`` for a message: numeric order, text keys (a file of another
    shape) after them, never an error of its own."""
    return ", ".join(sorted(map(str, mapping), key=lambda k: (not k.isdigit(),
                                                               int(k) if k.isdigit() else 0, k)))


def _case(doc: dict[str, Any], options: Options, path: Path) -> dict[str, Any]:
    mbs, tp = str(options.micro_batch), str(options.tensor_parallel)
    if mbs not in doc or not isinstance(doc[mbs], dict):
        raise InputError(f"no micro-batch {mbs} (the file has {_key_list(doc)}; expected "
                         "{micro_batch: {tensor_parallel: {layer: [f, b, u]}}})",
                         path=path, field=mbs)
    if tp not in doc[mbs] or not isinstance(doc[mbs][tp], dict):
        raise InputError(f"no tensor-parallel degree {tp} for micro-batch {mbs} (has "
                         f"{_key_list(doc[mbs])})", path=path,
                         field=f"{mbs}.{tp}")
    return doc[mbs][tp]


def _layers(case: dict[str, Any], config: ModelConfig, where: str, path: Path,
            duplicates: list[str]) -> list[tuple[float, float, float]]:
    """The [forward, backward, update] triples, checked, in layer order."""
    expected = config.layers + 2
    try:
        keys = sorted(int(k) for k in case)
    except ValueError:
        raise InputError("layer keys must be integers", path=path, field=where) from None
    if keys != list(range(expected)):
        copy = f"; it has the same numbers as {', '.join(duplicates)}" if duplicates else ""
        raise InputError(f"{len(keys)} layers (indices {keys[0]}..{keys[-1]}), but "
                         f"{config.name} has {config.layers} transformer layers + embedding "
                         f"+ head = {expected}{copy}", path=path, field=where)
    triples = []
    for k in keys:
        value = case[str(k)]
        field = f"{where}.{k}"
        if not isinstance(value, list) or len(value) != 3:
            raise InputError("expected [forward_s, backward_s, update_s]", path=path,
                             field=field)
        for name, v in zip(("forward_s", "backward_s", "update_s"), value, strict=True):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                    or v < 0:
                raise InputError(f"{name} {v!r} must be a finite number >= 0", path=path,
                                 field=field)
        triples.append((float(value[0]), float(value[1]), float(value[2])))
    if sum(t[1] for t in triples) <= 0:
        raise InputError("every backward time is 0: the profile has no backward", path=path,
                         field=where)
    return triples


def _warn_profile(triples: list[tuple[float, float, float]], sink: WarningSink) -> int:
    """Warnings about the numbers; returns how many transformer layers repeat layer 1."""
    middle = triples[1:-1]
    repeats = len(middle) - len({t[:2] for t in middle})
    if repeats:
        sink.warn(f"{repeats} of {len(middle)} transformer layers repeat another layer's "
                  "(forward, backward): Sailor's profiler times a few layers and copies the "
                  "rest (docs/PROFILING.md)")
    updates = {t[2] for t in triples}
    if len(updates) > 1:
        sink.warn(f"update times differ across layers ({min(updates):g}..{max(updates):g} s); "
                  "Sailor's planner uses their maximum")
    values = [v for t in triples for v in t[:2] if v > 0]
    if values and all(abs(v * 1e4 - round(v * 1e4)) < 1e-6 for v in values):
        sink.warn("every time is a multiple of 0.1 ms: the file gives 1-2 significant digits")
    bwd, fwd = triples[0][1], triples[0][0]
    if bwd < 1e-5:
        sink.warn(f"the embedding's backward is {bwd:g} s, far below its forward {fwd:g} s; "
                  "kept as given")
    return repeats


def _frame(config: ModelConfig, triples: list[tuple[float, float, float]], tp: int
           ) -> pd.DataFrame:
    n = len(triples)
    records = []
    for k, (fwd, bwd, _update) in enumerate(triples):
        kind = "embedding" if k == 0 else "head" if k == n - 1 else "transformer"
        numel = layer_params(config, kind, tp)
        records.append({"name": f"layer{k:02d}.{kind}", "layer": k, "numel": numel,
                        "bytes": numel * BYTES_PER_PARAM, "forward_s": fwd,
                        "backward_s": bwd, "ready_order": n - 1 - k})
    frame = pd.DataFrame(records)
    for col in ("forward_s", "backward_s"):
        frame[col] = frame[col].astype(np.float64)
    return frame


def _meta(path: Path, options: Options, config: ModelConfig, ctx: dict[str, Any],
          sink: WarningSink) -> dict[str, Any]:
    rel = "/".join(path.parts[-3:])
    notes = (
        f"Profile entry micro-batch {options.micro_batch}, tensor-parallel "
        f"{options.tensor_parallel}: {ctx['n']} layers (embedding, {config.layers} transformer "
        "layers, head), one row each; forward_s/backward_s = the file's values (s). "
        f"{ctx['repeats']} transformer layers repeat another's numbers (Sailor times a few "
        "and copies the rest). The file's third value, the update time, is "
        f"{ctx['update']:g} s on every layer and is one per-model number in Sailor's planner "
        "(max over layers): kept as profile_update_s, update_s = 0. Parameters from the "
        f"public {config.name} configuration per tensor-parallel rank (formula: "
        "gradsched.traces.importers.sailor.layer_params), fp32 bytes; the tied output head "
        "shares the embedding row. Sailor's own llm_info.json counts the same transformer "
        "layers for OPT-350 but a 1024-wide, 50304-row embedding and an untied head; its "
        "GPT-Neo layers have q/k/v biases (78,676,480 vs 78,668,800 here). Sequence length "
        f"{options.sequence_length} (Sailor's training_config_*.json; not in the profile); "
        "the precision of the timed run is not stated in the profile."
    )
    if ctx["duplicates"]:
        notes += (" WARNING: the same numbers appear in " + ", ".join(ctx["duplicates"]) +
                  ": at most one of these files is a measurement of its own label.")
    if options.note:
        notes += " " + options.note
    gpu = options.gpu or path.parent.name
    return {
        "kind": "compute",
        "model": config.name,
        "batch_size": options.micro_batch,
        "sequence_length": options.sequence_length,
        "tensor_parallel": options.tensor_parallel,
        "device": options.device or GPUS.get(gpu, gpu) + f" (Sailor's label {gpu})",
        "dtype": "fp32",
        "world_size": 1,
        "software": {"framework": "PyTorch", "profiler": "Sailor (sailor/profiling)"},
        "capture_method": "Sailor profiler: per-layer forward/backward time of one "
                          "micro-batch; a few transformer layers timed, the rest copied",
        "iterations": None,
        "date": "not recorded by the source",
        "source": options.source or DEFAULT_SOURCE.format(rel=rel),
        "forward_measured": True,
        "forward_backward_s": ctx["fwd"] + ctx["bwd"],
        "profile_update_s": ctx["update"],
        "content_sha256": ctx["hash"],
        "duplicate_of": ctx["duplicates"],
        "rows": "one row per layer (embedding, transformer layers, head); all parameters "
                "of a layer are one row",
        "original_file": rel,
        "importer": NAME,
        "importer_version": IMPORTER_VERSION,
        "warnings": sink.for_meta(),
        "notes": notes,
    }


def _config(options: Options, path: Path) -> ModelConfig:
    key = options.model or path.parent.parent.name
    if key not in MODELS:
        raise InputError(f"unknown model {key!r} (known: {', '.join(MODELS)}); pass model",
                         path=path, field="model")
    for name in ("micro_batch", "tensor_parallel", "sequence_length"):
        if getattr(options, name) <= 0:
            raise InputError(f"{name} must be positive", path=path, field=name)
    config = MODELS[key]
    tp = options.tensor_parallel
    if any(d % tp for d in (config.hidden, config.ffn)):
        raise InputError(f"tensor_parallel {tp} does not divide hidden/ffn", path=path,
                         field="tensor_parallel")
    return config


def import_sailor(path: str | Path, options: Options | None = None) -> ImportResult:
    """Parse a Sailor ``profile.json`` into a validated :class:`ComputeTrace`."""
    options = options or Options()
    path = Path(path)
    config = _config(options, path)
    doc = _load(path)
    sink = WarningSink(path)
    duplicates = find_duplicates(path, doc) if options.check_duplicates else []
    if duplicates:
        sink.warn("the same numbers (parsed content) as " + ", ".join(duplicates) +
                  ": likely a copy, not an independent measurement")
    where = f"{options.micro_batch}.{options.tensor_parallel}"
    triples = _layers(_case(doc, options, path), config, where, path, duplicates)
    repeats = _warn_profile(triples, sink)
    ctx = {"n": len(triples), "repeats": repeats, "update": max(t[2] for t in triples),
           "fwd": sum(t[0] for t in triples), "bwd": sum(t[1] for t in triples),
           "hash": content_hash(doc), "duplicates": duplicates}
    frame = _frame(config, triples, options.tensor_parallel)
    compute = ComputeTrace.from_frame(frame, _meta(path, options, config, ctx, sink))
    return ImportResult(compute=compute, warnings=list(sink.items))
