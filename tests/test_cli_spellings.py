"""One spelling per concept across the ``gradsched`` CLI (``docs/cli.md``): two options of
any two sub-commands that name one concept must be spelled the same. Each option's long
spelling is reduced to its concept through a small table of known synonyms (whole
spellings, words, and unit suffixes); two different spellings with one concept fail,
unless :data:`DISTINCT` says, with its reason, that they are two concepts.

``PYTHONPATH=src python -m tests.test_cli_spellings`` lists every concept with its
spellings and the commands that use each (to look for synonyms the tables lack).
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from gradsched import cli
from tests.robustness.cli_tree import options

SAME_CONCEPT: dict[str, str] = {
    "--ranks": "--world-size", "--nranks": "--world-size", "--num-ranks": "--world-size",
    "--world": "--world-size", "--nprocs": "--world-size",
    "--threads-per-rank": "--threads", "--intra-op-threads": "--threads",
    "--batch-per-rank": "--batch-size", "--batch": "--batch-size", "--bs": "--batch-size",
    "--op-timeout": "--timeout", "--collective-timeout": "--timeout",
    "--time-limit": "--deadline", "--wall-time": "--deadline",
    "--warmup-iters": "--warmup", "--random-seed": "--seed",
}
"""Whole spellings (after the unit suffix is dropped) that name another's concept."""

SAME_WORD: dict[str, str] = {
    "iterations": "iters", "iteration": "iter", "sequence": "seq", "length": "len",
    "output": "out", "number": "num", "n": "num", "directory": "dir", "folder": "dir",
    "config": "conf", "configuration": "conf", "maximum": "max", "minimum": "min",
}
"""Words that are one word spelled two ways (the key is reduced to the value)."""

UNITS = ("s", "mb", "mib", "pct")
"""Unit suffixes (house rule: the unit in the name): ``--timeout`` and ``--timeout-s`` are
one concept."""

DISTINCT: dict[frozenset[str], str] = {}
"""Pairs of spellings that reduce to one concept yet name two (each with its reason), or
a rename still pending (marked PENDING)."""


def concept(spelling: str) -> str:
    """The concept an option's long spelling names: unit suffix dropped, whole-spelling
    and word synonyms reduced."""
    words = spelling.lstrip("-").lower().split("-")
    if len(words) > 1 and words[-1] in UNITS:
        words = words[:-1]
    whole = "--" + "-".join(words)
    whole = SAME_CONCEPT.get(whole, whole)
    return "-".join(SAME_WORD.get(w, w) for w in whole.lstrip("-").split("-"))


def spellings(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """Long spelling -> the commands that use it, over ``parser``'s whole tree."""
    found: dict[str, set[str]] = defaultdict(set)
    for name, action in options(parser):
        command = name.rpartition(" ")[0]
        for spelling in action.option_strings:
            if spelling.startswith("--"):
                found[spelling].add(command or "gradsched")
    return found


def doubled(parser: argparse.ArgumentParser) -> list[str]:
    """Each concept spelled more than one way (less :data:`DISTINCT`), with its commands."""
    by_concept: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for spelling, commands in spellings(parser).items():
        by_concept[concept(spelling)][spelling] = commands
    out = []
    for name, group in sorted(by_concept.items()):
        if len(group) > 1 and frozenset(group) not in DISTINCT:
            out.append(f"{name}: " + "; ".join(f"{s} ({', '.join(sorted(c))})"
                                               for s, c in sorted(group.items())))
    return out


def test_one_spelling_per_concept() -> None:
    assert doubled(cli.build_parser()) == []


def test_every_output_option_has_the_short_spelling() -> None:
    missing = sorted(name for name, action in options(cli.build_parser())
                     if "--output" in action.option_strings and "-o" not in action.option_strings)
    assert missing == []


def test_the_distinct_pairs_are_still_in_the_cli() -> None:
    present = set(spellings(cli.build_parser()))
    stale = [sorted(pair) for pair in DISTINCT if not pair <= present]
    assert stale == [], f"no longer both in the CLI, remove from DISTINCT: {stale}"


def test_a_doubled_spelling_is_caught() -> None:
    parser = argparse.ArgumentParser(prog="gradsched")
    sub = parser.add_subparsers()
    a, b, c = sub.add_parser("a"), sub.add_parser("b"), sub.add_parser("c")
    a.add_argument("--timeout-s")
    b.add_argument("--timeout")
    a.add_argument("--seq-len")
    c.add_argument("--sequence-length")
    b.add_argument("--world-size")
    c.add_argument("--ranks")
    c.add_argument("--iters")
    b.add_argument("--iterations")
    assert [line.split(":")[0] for line in doubled(parser)] == ["iters", "seq-len", "timeout",
                                                               "world-size"]


def test_the_concepts_of_known_spellings() -> None:
    assert concept("--timeout-s") == concept("--op-timeout-s") == concept("--timeout")
    assert concept("--threads-per-rank") == concept("--threads")
    assert concept("--batch-per-rank") == concept("--batch-size")
    assert concept("--deadline-s") != concept("--timeout-s")
    assert concept("--init-timeout-s") != concept("--timeout-s")


def concept_table(parser: argparse.ArgumentParser) -> list[str]:
    """Every concept, its spellings and their commands, one line each."""
    by_concept: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for spelling, commands in spellings(parser).items():
        by_concept[concept(spelling)][spelling] = commands
    return [f"{name}: " + "; ".join(f"{s} ({len(c)}: {', '.join(sorted(c))})"
                                    for s, c in sorted(group.items()))
            for name, group in sorted(by_concept.items())]


if __name__ == "__main__":
    print("\n".join(concept_table(cli.build_parser())))
