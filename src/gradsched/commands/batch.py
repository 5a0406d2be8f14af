"""``gradsched batch``: run many ``gradsched`` command lines in one process, in order.

The pipeline's per-case steps (a replay per comm trace, a fit per file) each cost more in
interpreter start-up and imports than in work; a rule that owns a whole family of them hands
the list to one ``gradsched batch`` job instead. Each line is one command as the shell would
pass it (``shlex`` quoting), preceded by the log file its output goes to::

    logs/fit/files/a.log fit traces/comm/a.csv --model all --table results/fit/files/a.csv

Each command runs through :func:`gradsched.cli.main` exactly as ``gradsched ARGS > LOG 2>&1``
would (same parser, same checks, same outputs); the first that fails stops the batch with
its exit status, naming the line and its log. Only the workflow's own command lines run
here, in the workflow's own process: nothing is served to another caller.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from gradsched.errors import ConfigError, InputError
from gradsched.io import read_text

MAX_LINES = 100_000
"""Command lines one batch may hold (a workflow family holds a few hundred)."""


def register(sub: argparse._SubParsersAction) -> None:
    batch = sub.add_parser(
        "batch", help="run many gradsched command lines in one process (the workflow's "
        "per-case steps), each with its own log")
    batch.add_argument("jobs", help="file of command lines, one per line: the log file, then "
                       "the gradsched arguments, shell-quoted ('-' = standard input; blank "
                       "lines and lines starting with # are skipped)")
    batch.set_defaults(func=_batch)


def parse_jobs(text: str, source: str) -> list[tuple[int, Path, list[str]]]:
    """``[(line number, log, argv)]`` of a job list; a line that does not parse, names no
    command, or runs ``batch`` itself raises :class:`InputError` naming ``source`` and the
    line."""
    jobs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise InputError(f"line {number}: {exc}", path=source) from None
        if len(words) < 2:
            raise InputError(f"line {number}: give the log file, then the command",
                             path=source)
        if words[1] == "batch":
            raise InputError(f"line {number}: a batch does not run a batch", path=source)
        jobs.append((number, Path(words[0]), words[1:]))
    if len(jobs) > MAX_LINES:
        raise InputError(f"{len(jobs)} command lines, more than {MAX_LINES}", path=source)
    return jobs


def run_logged(run: Callable[[list[str]], int], argv: list[str], log: Path) -> int:
    """``run(argv)`` with its standard output and error written to ``log`` (created, with
    its folder), as ``> LOG 2>&1`` does."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as handle, contextlib.redirect_stdout(handle), \
            contextlib.redirect_stderr(handle):
        return int(run(argv))


def _batch(args: argparse.Namespace) -> int:
    if args.jobs == "-":
        source, text = "<stdin>", sys.stdin.read()
    else:
        source, text = args.jobs, read_text(args.jobs)
    jobs = parse_jobs(text, source)
    run = getattr(args, "run_line", None)
    if run is None:  # set by gradsched.cli.main, which runs each line
        raise ConfigError("gradsched batch runs through the gradsched command line")
    for number, log, argv in jobs:
        code = run_logged(run, argv, log)
        if code != 0:
            print(f"gradsched batch: {source}, line {number} failed (exit {code}): "
                  f"gradsched {shlex.join(argv)} (log: {log})", file=sys.stderr)
            return code
    print(f"gradsched batch: {len(jobs)} commands from {source}")
    return 0
