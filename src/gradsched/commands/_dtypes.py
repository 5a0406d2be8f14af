"""``--param-dtype``, ``--reduce-dtype``, ``--float8-all-gather``: the dtypes sharded
collectives move (FSDP2's ``MixedPrecisionPolicy`` and torchao's float8 all-gather), shared
by ``shard plan|compare`` and ``advise --sharded``; made once into a
:class:`gradsched.collective_dtypes.CollectiveDtypes` (none given: every collective moves
the trace's bytes, FSDP2's default)."""

from __future__ import annotations

import argparse
from typing import Any

from gradsched.collective_dtypes import DTYPE_BYTES, CollectiveDtypes, parse_dtypes

OPTIONS = ("param_dtype", "reduce_dtype", "float8_all_gather")


def add_dtype_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The three options (module docstring)."""
    p.add_argument("--param-dtype", choices=tuple(DTYPE_BYTES), default=None,
                   help="MixedPrecisionPolicy(param_dtype=...): all-gathers move and gather "
                        "this dtype (default: the trace's element size)")
    p.add_argument("--reduce-dtype", choices=tuple(DTYPE_BYTES), default=None,
                   help="MixedPrecisionPolicy(reduce_dtype=...): reduce-scatters move this "
                        "dtype (default: the gradients', i.e. --param-dtype)")
    p.add_argument("--float8-all-gather", action="store_true",
                   help="torchao enable_fsdp_float8_all_gather: the decoder blocks' linear "
                        "weights all-gather one byte per element (LLM traces of gradsched "
                        "traces flops)")


def dtypes_of(args: argparse.Namespace, trace: Any = None) -> CollectiveDtypes | None:
    """The policy the options give, or ``None``; ``--float8-all-gather`` refused for a
    ``trace`` whose names do not say which tensors are linear weights
    (:data:`gradsched.replay.sharded_dtypes.FLOAT8_TRACES`)."""
    from gradsched.errors import ConfigError
    from gradsched.replay.sharded_dtypes import FLOAT8_TRACES

    if args.float8_all_gather and trace is not None \
            and trace.meta.get("capture_method") not in FLOAT8_TRACES:
        raise ConfigError("--float8-all-gather: the trace's names must say which tensors are "
                          "nn.Linear weights; only LLM traces of gradsched traces flops do")
    return parse_dtypes(args.param_dtype, args.reduce_dtype, args.float8_all_gather)


def given(args: argparse.Namespace) -> str | None:
    """The first of the options given (for a refusal), or ``None``."""
    for name in OPTIONS:
        if getattr(args, name) not in (None, False):
            return "--" + name.replace("_", "-")
    return None
