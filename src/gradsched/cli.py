"""The ``gradsched`` command line: one sub-command per stage, no logic of its own.

Each module in :mod:`gradsched.commands` defines ``register(subparsers)``, which adds its
sub-command(s) and sets ``func`` (called with the parsed arguments, returning an exit code).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradsched
from gradsched import commands
from gradsched.commands._outputs import mark_outputs, preflight
from gradsched.errors import GradschedError
from gradsched.io import max_input_bytes, read_bytes
from gradsched.printable import PrintableStream
from gradsched.streams import STDERR, STDOUT, GuardedStream, deliver_stdout, reserve_standard_fds

# The command module that registers each verb: a run loads only its verb's module. Loading
# all of them (scipy.stats, matplotlib, the advisor) cost every process ~1.8 s of CPU on the
# project's 2-core VM, and `make reproduce` starts ~230; `fit` alone loads in ~0.8 s, `replay`
# in ~1.25 s. tests/test_cli.py checks that this table is what the modules register.
VERB_MODULES = {
    "advise": "advise", "batch": "batch", "bench": "bench", "capture": "capture",
    "cluster": "cluster", "compress": "compress", "diagnose": "diagnose", "fit": "fit",
    "import": "importcmd", "plan": "replaycmd",
    "reexec": "reexec", "replay": "replaycmd", "report": "report", "run": "run", "shard": "shard",
    "study": "study", "traces": "traces",
}


VERB_HELP = {
    "advise": "recommend DDP's bucket caps (uniform or per bucket), or a gradsched plan, only "
              "where predicted to win by more than the model's error",
    "batch": "run many gradsched command lines in one process (the workflow's per-case "
             "steps), each with its own log",
    "bench": "benchmark gradsched's collective algorithms",
    "capture": "capture real traces with PyTorch (compute, profiled iterations, collective "
               "sweeps)",
    "cluster": "run a command per rank in an emulated cluster of network namespaces (needs "
               "root); 'cluster check' measures the shaped bandwidth",
    "compress": "gradient compression: train, profile, report",
    "diagnose": "why a job's communication is exposed: observed against predicted overlap "
                "per collective, the cause and the fix",
    "fit": "fit comm cost models to comm traces; held-out error",
    "import": "import public measurement logs as traces",
    "plan": "make one algorithm's plan (JSON), or a plan's DDP bucket_cap_mb_list (--emit ddp)",
    "reexec": "re-execute plans for real and compare with the replay",
    "replay": "plan and replay algorithms; one result row each",
    "report": "figures, tables, macros and checks from results",
    "run": "time plans through the executor (or PyTorch DDP) on real ranks",
    "shard": "sharded data parallelism: FSDP2 units and prefetch",
    "study": "run a study's cases (replays, checks) into a CSV",
    "traces": "validate, correct and list trace bundles, model an LLM's; print column "
              "dictionaries",
}
"""Each verb's one-line help, as its module registers it (tests/test_cli.py checks): the
top-level ``--help`` lists the verbs without loading any command module."""


def command_modules(argv: list[str] | None = None) -> list[str]:
    """The command modules to load for ``argv``: its verb's module when the first word is a
    known verb, else every module (``--help``, ``--version``, a typo: the full parser)."""
    if argv and argv[0] in VERB_MODULES:
        return [VERB_MODULES[argv[0]]]
    return sorted(info.name for info in pkgutil.iter_modules(commands.__path__)
                  if not info.name.startswith("_"))  # _*: helpers of the command modules


def load_array_libraries() -> None:
    """numpy and pandas, imported before any command module and under :func:`main`'s watch
    for Ctrl-C: imported first inside a library that imports them optionally (torch does),
    the ImportError numpy makes of a KeyboardInterrupt would be swallowed and the command
    would run on to its end. (The verbs' list alone needs neither.)"""
    import numpy  # noqa: F401
    import pandas  # noqa: F401


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser with the sub-commands of :func:`command_modules` (all of them without
    ``argv``). A command line whose first word is not a verb (``--help``, a typo, nothing)
    gets the verbs' names and one-line help only (:data:`VERB_HELP`): enough to list them
    or refuse, and no command module is loaded."""
    parser = argparse.ArgumentParser(
        prog="gradsched",
        description="Communication scheduling for data-parallel training: import and "
        "capture traces, fit cost models, plan, replay and re-execute.",
    )
    parser.add_argument("--version", action="version", version=f"gradsched {gradsched.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if argv is not None and (not argv or argv[0] not in VERB_MODULES):
        for verb, text in VERB_HELP.items():
            sub.add_parser(verb, help=text)
        return parser
    load_array_libraries()
    for name in command_modules(argv):
        importlib.import_module(f"{commands.__name__}.{name}").register(sub)
    mark_outputs(parser)
    return parser


def _undecodable_file(argv: list[str]) -> str | None:
    """The first file named on the command line (alone or as ``--opt=FILE``) whose bytes
    are not UTF-8: the likely source of a decoding error raised without a path."""
    for token in argv:
        candidate = Path(token.split("=", 1)[-1])
        try:
            if not candidate.is_file() or candidate.stat().st_size > 2**28:
                continue
            raw = read_bytes(candidate)  # the input gate's reader
            if raw[:2] == b"\x1f\x8b" or b"\x00" in raw[:4096]:
                continue  # compressed or binary: not a text input
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return str(candidate)
        except (OSError, GradschedError):
            continue
    return None


def describe_error(exc: BaseException, argv: list[str] | None = None) -> str:
    """One line for an OSError (naming its path), a decoding error, an overflow or an
    out-of-memory error."""
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
        return f"{' -> '.join(paths)}: {reason}" if paths else reason
    if isinstance(exc, UnicodeDecodeError):
        culprit = _undecodable_file(argv)
        where = f"{culprit}: " if culprit else ""
        return (f"{where}input is not {exc.encoding} text (byte 0x{exc.object[exc.start]:02x} at "
                f"offset {exc.start}): {exc.reason}")
    if isinstance(exc, OverflowError):
        return f"a number is out of range: {exc}"
    if isinstance(exc, MemoryError):
        return "out of memory: the input asks for more than this machine holds"
    return f"{type(exc).__name__}: {exc}"


def _call(args: argparse.Namespace) -> int:
    """Run the command; SIGTERM, SIGHUP and SIGUSR1 raise ``SystemExit(128 + signum)`` so
    that its staged outputs and temporary files are removed on the way out."""
    from gradsched.distributed.lifeline import exit_on_signals

    with exit_on_signals((signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)):
        return int(args.func(args) or 0)


class _Interrupts:
    """Notes every SIGINT while :func:`main` runs (then raises KeyboardInterrupt as
    Python's own handler does): a Ctrl-C that lands inside a C extension's import (numpy
    turns it into an ImportError) or that a library swallows still ends as interrupted."""

    def __init__(self) -> None:
        self.hit = False
        self.previous: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        self.hit = True
        raise KeyboardInterrupt

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *_: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script. Ctrl-C at any point (while the command modules
    load, while ranks start, while they run) ends with one line and exit status 130.
    Everything the command prints goes through :func:`gradsched.printable.printable`
    (control characters read from data files are escaped, never sent to the terminal)."""
    closed = reserve_standard_fds()  # a closed 0/1/2 gets /dev/null before any file opens
    with _printable_streams():
        return _main(list(sys.argv[1:] if argv is None else argv), closed)


@contextlib.contextmanager
def _printable_streams() -> Iterator[None]:
    """``sys.stdout``/``sys.stderr`` wrapped in :class:`PrintableStream` while a command
    runs (once: a nested :func:`main` keeps the outer wrapper); restored afterwards."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, PrintableStream):
        sys.stdout = PrintableStream(GuardedStream(sys.stdout, STDOUT))
    if not isinstance(sys.stderr, PrintableStream):
        sys.stderr = PrintableStream(GuardedStream(sys.stderr, STDERR, quiet=True))
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = saved


def _main(argv: list[str], closed: list[str]) -> int:
    command = ""
    with _Interrupts() as interrupts:
        try:
            try:
                parser = build_parser(argv)
                args = parser.parse_args(argv)
            except (Exception, SystemExit):
                if interrupts.hit:  # an import failed because of the Ctrl-C
                    raise KeyboardInterrupt from None
                raise
            command = f" {args.command}"
            if args.command == "batch":  # its lines run through this entry point
                args.run_line = main
            if interrupts.hit:
                raise KeyboardInterrupt
            return _run(args, argv, interrupts, closed)
        except KeyboardInterrupt:
            print(f"gradsched{command}: interrupted", file=sys.stderr)
            return 130


def _run(args: argparse.Namespace, argv: list[str], interrupts: _Interrupts,
         closed: list[str]) -> int:
    """Run the parsed command; every failure is one line on stderr. What it printed is
    delivered before it ends (and before each output is committed: gradsched.streams)."""
    try:
        if STDOUT in closed:
            raise GradschedError(f"{STDOUT} is closed; gradsched prints its results there "
                                 "(redirect it to a file or /dev/null)")
        max_input_bytes()  # $GRADSCHED_MAX_INPUT_BYTES checked once, whatever the command
        preflight(args)  # every output checked before any work starts
        code = _call(args)
        deliver_stdout()
        if interrupts.hit:  # a library caught the KeyboardInterrupt
            raise KeyboardInterrupt
        return code
    except GradschedError as exc:
        if interrupts.hit:
            raise KeyboardInterrupt from None
        print(f"gradsched {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, UnicodeError, OverflowError, MemoryError) as exc:
        # Environment and range failures the commands did not name themselves: one line
        # naming the path, never a traceback.
        print(f"gradsched {args.command}: error: {describe_error(exc, argv)}",
              file=sys.stderr)
        return 2
    except Exception as exc:  # the last resort: one line, not a traceback
        if interrupts.hit:  # e.g. an ImportError made of a Ctrl-C
            raise KeyboardInterrupt from None
        if os.environ.get("GRADSCHED_TRACEBACK"):
            raise
        if type(exc).__name__ in ("EmptyDataError", "ParserError") \
                and type(exc).__module__.startswith("pandas"):
            print(f"gradsched {args.command}: error: a CSV input is empty or malformed: "
                  f"{' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        print(f"gradsched {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(an input gradsched does not check yet, or a bug: rerun with "
              "GRADSCHED_TRACEBACK=1 for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
