"""``--stragglers off|auto|CV`` of ``replay``, ``advise`` (and ``--sharded``) and ``shard
plan|compare``: the compute trace stretched to the expected slowest of P ranks before the
replay (:mod:`gradsched.costmodel.stragglers`).

Default ``off``: the measured cvs come from one or two single-GPU H200 machines, not from
the ranks of one job, and the one validation (PARAM's 8-rank DLRM step) errs by -44 %; and
turning it on by default would move every committed GPU replay output at P > 1
(``paper/expected-outputs.sha256``). ``auto`` takes the measured cv of the trace's device
class; a note line on stderr says what was applied."""

from __future__ import annotations

import argparse
import sys

from gradsched.commands._args import real
from gradsched.costmodel.stragglers import (
    MAX_CV,
    MEASURED,
    apply_stragglers,
    note,
    parse_stragglers,
    resolve_stragglers,
)
from gradsched.errors import ConfigError
from gradsched.traces.bundle import ComputeTrace


def _parse(text: str) -> str | float:
    """argparse type: ``off``, ``auto`` or a number read first by the hardened number parser
    of :mod:`gradsched.commands._args` (no ``1_6``, ``１６``, ``0x10``, ``nan``), then checked
    by :func:`gradsched.costmodel.stragglers.parse_stragglers` (range [0, MAX_CV])."""
    if text.strip().lower() not in ("off", "auto"):
        try:
            _ANY_NUMBER(text)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(
                f"{exc}: expected off, auto or a coefficient of variation in [0, {MAX_CV}]") \
                from None
    try:
        return parse_stragglers(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--stragglers ")) from None


_ANY_NUMBER = real()
_parse.__name__ = "number"  # a hardened number (or off, auto)


def add_stragglers(parser: argparse.ArgumentParser) -> None:
    """Add ``--stragglers``."""
    parser.add_argument(
        "--stragglers", type=_parse, default="off", metavar="off|auto|CV",
        help="wait for the slowest of P ranks: stretch the trace's compute by 1 + cv e_P "
             "(e_P: expected largest of P standard normals); auto: the cv measured for the "
             "trace's GPU class (gpu-bound "
             f"{MEASURED['gpu-bound'].cv:g}, host-bound {MEASURED['host-bound'].cv:g}; "
             "gradsched study stragglers); CV: a coefficient of variation in "
             f"[0, {MAX_CV}]; default off")


def with_stragglers(args: argparse.Namespace, trace: ComputeTrace,
                    world: int) -> ComputeTrace:
    """``trace`` as ``--stragglers`` asks at ``world`` ranks; a note on stderr when on."""
    choice = getattr(args, "stragglers", "off")
    setting = resolve_stragglers(choice, trace, world)
    if setting is None:
        return trace
    print(f"gradsched {args.command}: note: {note(setting, world)}", file=sys.stderr)
    return apply_stragglers(trace, setting, world)
