"""``--overlap-slowdown off|auto|VALUE``, shared by the replay commands (``replay``, ``plan``,
``advise``, ``advise --sharded``, ``shard plan|compare``): compute slowed while an NCCL kernel
runs beside it (:mod:`gradsched.costmodel.overlap_slowdown`). ``auto`` (the default) applies
the committed value of the compute trace's GPU generation and says so in one line on stderr;
CPU traces get nothing."""

from __future__ import annotations

import argparse
import sys

from gradsched.commands._args import real

HELP = ("compute speed divisor while a collective runs beside it (NCCL kernels share the GPU's "
        "SMs and memory bandwidth): auto (default) = the measured value of the compute "
        "trace's GPU generation (none for CPU traces), off, or a number >= 1")


def _setting(text: str) -> str | float:
    """argparse type: ``auto``, ``off`` or a number read first by the hardened number parser
    of :mod:`gradsched.commands._args` (no ``1_6``, ``１６``, ``0x10``, ``nan``), then
    checked by :func:`gradsched.costmodel.overlap_slowdown.parse_setting` (range >= 1)."""
    from gradsched.costmodel.overlap_slowdown import OVERLAP_CHOICES, parse_setting
    from gradsched.errors import ConfigError

    if text not in OVERLAP_CHOICES:
        try:
            _ANY_NUMBER(text)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc}: expected auto, off or a number >= 1") \
                from None
    try:
        return parse_setting(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--overlap-slowdown ")) \
            from None


_ANY_NUMBER = real()
_setting.__name__ = "number"  # a hardened number (or auto, off)


def add_overlap_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--overlap-slowdown`` (default ``auto``)."""
    parser.add_argument("--overlap-slowdown", type=_setting, default="auto",
                        metavar="auto|off|S", help=HELP)


def overlap_choice(args: argparse.Namespace, meta: dict, command: str):
    """The :class:`~gradsched.costmodel.overlap_slowdown.OverlapChoice` for this trace's
    metadata; its note printed on stderr (``gradsched COMMAND: note: ...``)."""
    from gradsched.costmodel.overlap_slowdown import resolve

    choice = resolve(meta, args.overlap_slowdown)
    if choice.note:
        print(f"gradsched {command}: note: {choice.note}", file=sys.stderr)
    return choice


def overlap_slowdown(args: argparse.Namespace, meta: dict, command: str) -> float:
    """The slowdown to replay with (1 = none), its note printed (:func:`overlap_choice`)."""
    return overlap_choice(args, meta, command).value


def overlap_applies(args: argparse.Namespace, meta: dict) -> bool:
    """Whether the replay will apply the measured overlap slowdown, by the rules of
    :func:`with_overlap` and :func:`sharded_overlap`: not where nothing overlaps (blocking
    semantics), where the replay models no interference (``--host``), or where the user's
    own compute slowdown replaces it (``--interference``, ``--compute-slowdown``); otherwise
    ``--overlap-slowdown`` resolved on the trace. Prints nothing (the at-scale note asks it
    before the replay resolves and announces the slowdown)."""
    from gradsched.costmodel.overlap_slowdown import resolve

    if (getattr(args, "semantics", "streams") == "blocking" or getattr(args, "host", False)
            or getattr(args, "interference", None) is not None
            or getattr(args, "compute_slowdown", 1.0) != 1.0):
        return False
    return resolve(meta, getattr(args, "overlap_slowdown", "auto")).value > 1.0


def with_overlap(args: argparse.Namespace, meta: dict, command: str,
                 interference: dict[str, float], *, given: str | None = None,
                 host: bool = False) -> dict[str, float]:
    """The DDP replay's interference settings with the overlap slowdown as its
    ``compute_slowdown``. ``given``: the option that already sets the interference
    (``--interference``, ``--compute-slowdown``): ``auto`` yields to it, a number is refused
    beside it. ``host``: the host-aware replay models no interference: ``auto`` applies
    nothing, a number is refused."""
    from gradsched.errors import ConfigError

    explicit = not isinstance(args.overlap_slowdown, str)
    if explicit and (given or host):
        raise ConfigError(f"give --overlap-slowdown or {given or '--host'}, not both "
                          + ("(both set the compute slowdown)" if given else
                             "(the host-aware replay models no interference)"))
    if host:
        from gradsched.costmodel.overlap_slowdown import is_gpu_trace

        if is_gpu_trace(meta):
            print(f"gradsched {command}: note: overlap slowdown not applied (the host-aware "
                  "replay models no interference)", file=sys.stderr)
        return interference
    if given:
        return interference
    slowdown = overlap_slowdown(args, meta, command)
    return interference if slowdown == 1.0 else {**interference,
                                                 "compute_slowdown": slowdown}


def sharded_overlap(args: argparse.Namespace, meta: dict, command: str,
                    semantics: str) -> float:
    """The sharded replay's compute slowdown. Blocking semantics: the host waits for every
    collective, nothing overlaps: ``auto`` applies nothing and a number is refused (it would
    be ignored)."""
    from gradsched.errors import ConfigError

    if semantics != "blocking":
        return overlap_slowdown(args, meta, command)
    if not isinstance(args.overlap_slowdown, str) and args.overlap_slowdown != 1.0:
        raise ConfigError("--overlap-slowdown has no effect with blocking semantics (the host "
                          "waits for every collective: no compute overlaps one); drop it")
    return 1.0
