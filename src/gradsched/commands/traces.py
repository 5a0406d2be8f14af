"""``gradsched traces validate|columns|inventory|correct|flops``: check trace bundles, print
the column dictionaries, list traces with their capture facts, correct a hooked capture, and
price a published LLM shape with a FLOPs model (labelled synthetic)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._args import positive_int, real
from gradsched.commands._outputs import output_file
from gradsched.errors import ConfigError
from gradsched.staging import Staging
from gradsched.traces import COMM_COLUMNS, COMPUTE_COLUMNS, CommTrace, ComputeTrace
from gradsched.traces.columns import column_dictionary_markdown


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("traces", help="validate, correct and list trace bundles, model an "
                            "LLM's; print column dictionaries")
    tsub = parser.add_subparsers(dest="traces_command", required=True)
    val = tsub.add_parser("validate", help="validate compute/comm trace CSVs and sidecars")
    val.add_argument("paths", nargs="+", type=Path, help="trace CSVs (kind read from the sidecar)")
    val.set_defaults(func=_validate)
    cols = tsub.add_parser("columns", help="print the column dictionaries as Markdown")
    cols.set_defaults(func=_columns)
    inv = tsub.add_parser("inventory", help="one row per trace: what, how, quality checks")
    inv.add_argument("paths", nargs="+", type=Path, help="trace CSVs")
    inv.add_argument("-o", "--output", required=True, type=output_file, help="CSV to write")
    inv.set_defaults(func=_inventory)
    cor = tsub.add_parser("correct", help="rescale a hooked GPU capture's rows to the "
                          "hook-free iteration of its run (gradsched.capture.correction)")
    cor.add_argument("trace", type=Path, help="compute trace CSV written by capture compute")
    cor.add_argument("-o", "--output", required=True, type=output_file,
                     help="corrected trace CSV (sidecar beside it)")
    cor.add_argument("--hook-free-summary", type=Path, action="append", default=[],
                     help="JSON {stem: {cuda_event_medians_s: {forward, backward} or "
                          "{label: {forward, backward}}}}: other processes' hook-free medians "
                          "(the spread); repeatable")
    cor.add_argument("--gpu-busy", type=real(0.0, 1.0), default=None,
                     help="the kineto-gpu importer's GPU busy share (gpu_busy_share) of a "
                          "hook-free profiled step of the same configuration, in [0, 1]: "
                          "host-bound below 0.8 (gradsched.traces.host_bound); without it "
                          "host_bound is not judged")
    cor.add_argument("--gpu-busy-source", default=None, help="where --gpu-busy comes from")
    cor.set_defaults(func=_correct)
    _register_flops(tsub)


def _register_flops(tsub: argparse._SubParsersAction) -> None:
    from gradsched.gpus import GPU_PEAK_FLOPS
    from gradsched.llm_shapes import llm_names

    flops = tsub.add_parser("flops", help="a compute trace of an LLM from its config.json "
                            "(--model: a committed one, --hf-config: any) from a FLOPs model: "
                            "synthetic, labelled")
    which = flops.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", choices=llm_names())
    which.add_argument("--hf-config", metavar="PATH|NAME",
                       help="a Hugging Face config.json (or a folder holding one) of a decoder "
                            "(model_type llama, mistral, qwen2, mixtral, gpt_neox, gpt2, "
                            "deepseek_v3), or a committed one's name (data/external/hf-configs)")
    flops.add_argument("--checkpointing", choices=("none", "selective", "full"), default="full",
                       help="activation recomputation (Korthikanti et al. 2022): its recomputed "
                            "forward joins backward_s, its activation bytes the sidecar "
                            "(default full)")
    flops.add_argument("--micro-batch", type=positive_int, default=1,
                       help="samples per rank per micro-batch (default 1)")
    flops.add_argument("--seq-len", type=positive_int, default=None,
                       help="tokens per sample (default: a committed model's pre-training "
                            "sequence, data/external/hf-configs/cards.json; a config's "
                            "max_position_embeddings)")
    flops.add_argument("--gpu", choices=sorted(GPU_PEAK_FLOPS), default="a100",
                       help="whose dense bf16 peak prices the FLOPs and memory bandwidth the "
                            "Adam step (default a100)")
    flops.add_argument("--mfu", type=real(0.0, 1.0, low_open=True), default=0.4,
                       help="model-FLOPs utilisation, in (0, 1] (default 0.4)")
    flops.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16",
                       help="gradient element type (default bf16)")
    flops.add_argument("-o", "--output", required=True, type=output_file,
                       help="compute trace CSV (sidecar beside it)")
    flops.set_defaults(func=_flops)


def _validate(args: argparse.Namespace) -> int:
    from gradsched.io import read_json
    from gradsched.traces.bundle import meta_path
    from gradsched.traces.importers.kineto_gpu import RECORD_KIND, CommRecord

    for path in args.paths:
        kind = "comm"
        sidecar = meta_path(path)
        if sidecar.is_file():
            kind = read_json(sidecar).get("kind", "comm")  # errors name the sidecar
        if kind == RECORD_KIND:  # a kineto-gpu comm record (collectives of one run)
            frame = CommRecord.load(path).frame
        else:
            frame = (ComputeTrace.load(path) if kind == "compute" else CommTrace.load(path)).frame
        print(f"ok  {path}  ({kind}, {len(frame)} rows)")
    return 0


def _inventory(args: argparse.Namespace) -> int:
    from gradsched.io import write_csv_atomic
    from gradsched.traces.inventory import inventory

    frame = inventory(args.paths)
    write_csv_atomic(args.output, frame)
    print(f"{len(frame)} traces -> {args.output}")
    return 0


def _correct(args: argparse.Namespace) -> int:
    from gradsched.capture.correction import CorrectionInputs, correct, read_hook_free_summary

    if args.gpu_busy_source is not None and args.gpu_busy is None:
        raise ConfigError("--gpu-busy-source says where --gpu-busy comes from: give "
                          "--gpu-busy, or drop it")
    trace = ComputeTrace.load(args.trace)
    samples = [s for summary in args.hook_free_summary
               for s in read_hook_free_summary(summary, args.trace.stem)]
    inputs = CorrectionInputs(samples=samples, gpu_busy=args.gpu_busy,
                              gpu_busy_source=args.gpu_busy_source,
                              derived_from=args.trace.as_posix())
    fixed, rec = correct(trace, inputs)
    with Staging() as stage:  # the CSV and its sidecar: both or neither
        fixed.save(stage.file(args.output))
    print(f"{args.trace} -> {args.output}: forward x {rec['forward_factor']:.4f} "
          f"(raw {rec['raw_forward_rel_error']:+.1%}), backward x {rec['backward_factor']:.4f} "
          f"(raw {rec['raw_backward_rel_error']:+.1%}); host_bound {rec['host_bound']}; "
          f"spread {rec['spread']['max_over_min']:.2f}x")
    return 0


def _flops(args: argparse.Namespace) -> int:
    from gradsched.llm_shapes import hf_config_shape
    from gradsched.traces.flops import FlopsSetting, flops_trace

    setting = FlopsSetting(micro_batch=args.micro_batch, seq_len=args.seq_len, gpu=args.gpu,
                           mfu=args.mfu, dtype=args.dtype, checkpointing=args.checkpointing,
                           optimizer="adam")
    shape = hf_config_shape(args.hf_config) if args.hf_config else args.model
    trace = flops_trace(shape, setting)
    with Staging() as stage:
        trace.save(stage.file(args.output))
    meta = trace.meta
    print(f"{meta['model']}: {meta['tensors']} tensors, {meta['parameters'] / 1e9:.2f}e9 "
          f"parameters; modelled forward+backward {meta['forward_backward_s']:.3g} s "
          f"({args.checkpointing} recomputation: activations "
          f"{meta['activation_bytes'] / 2**30:.4g} GiB), Adam step "
          f"{meta['update_s']:.3g} s, per micro-batch of "
          f"{args.micro_batch} x {meta['seq_len']} tokens on {args.gpu} at {args.mfu:.0%} of peak "
          f"(synthetic: a FLOPs model, not a measurement) -> {args.output}")
    return 0


def _columns(args: argparse.Namespace) -> int:
    print("## Compute trace\n")
    print(column_dictionary_markdown(COMPUTE_COLUMNS))
    print("## Comm trace\n")
    print(column_dictionary_markdown(COMM_COLUMNS))
    return 0
