"""No option is ignored: every option of every sub-command (the parser tree of
``gradsched.cli`` is walked) has an entry in ``option_effects.REGISTRY`` saying how its
effect is shown, and each is checked here:

* a probe runs the command in-process without and with the option: the output must change,
  or the option be refused with exit status 2 and one line naming it (the commands that
  start ranks stop where they hand the work over: what they ask for must change);
* an output option's file appears where it says;
* a ``CoveredBy`` entry names a test that exists and mentions the option;
* ``Exempt`` is for ``--help`` and ``--version`` only, ``Unprobed`` is counted.

An option added later without an entry fails :func:`test_every_option_has_an_entry`; the
planted regressions show that a command which drops its option is caught.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Iterator

import pytest

from gradsched import cli
from tests.robustness.cli_tree import command_and_option, options
from tests.robustness.option_effects import REGISTRY, SLOW, make_inputs
from tests.robustness.option_probes import (
    CoveredBy,
    Entries,
    Exempt,
    Output,
    Probe,
    Runner,
    Unprobed,
    covering_source,
    each,
    judge,
)

UNPROBED_EXPECTED = 0
"""How many options have no probe and no test (each listed in its ``Unprobed`` reason);
raising it is a decision, not a side effect."""

EXEMPT_OPTIONS = ("--help", "--version")
"""The only options an ``Exempt`` entry may name."""


def _actions() -> dict[str, argparse.Action]:
    return dict(options(cli.build_parser()))


ACTIONS = _actions()


def unregistered(parser: argparse.ArgumentParser, registry: dict[str, Entries]) -> list[str]:
    """The options of ``parser``'s tree without an entry in ``registry``."""
    return [name for name, _ in options(parser) if name not in registry]


def spellings(action: argparse.Action) -> tuple[str, ...]:
    """What a refusal of ``action`` may name it by: its option strings, its dest (the
    field name importers use) and its metavar."""
    metavar = [action.metavar] if isinstance(action.metavar, str) else []
    return (*action.option_strings, action.dest, *metavar)


# --------------------------------------------------------------------------- coverage


def test_every_option_has_an_entry() -> None:
    assert len(ACTIONS) > 500  # the walk reaches every sub-command
    assert unregistered(cli.build_parser(), REGISTRY) == []
    assert sorted(set(REGISTRY) - set(ACTIONS)) == []  # no entry for an option that is gone


def test_the_coverage_check_finds_a_new_option() -> None:
    """A new option of an existing command, and a new command, have no entry: named."""
    parser = cli.build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    verbs.choices["replay"].add_argument("--new-knob", type=int, default=0)
    verbs.add_parser("brand-new").add_argument("--level")
    assert unregistered(parser, REGISTRY) == ["replay --new-knob", "brand-new --help",
                                              "brand-new --level"]


def test_exempt_is_for_help_and_version_only() -> None:
    for name, entries in REGISTRY.items():
        for entry in each(entries):
            if isinstance(entry, Exempt):
                assert command_and_option(name)[1] in EXEMPT_OPTIONS, name
                assert entry.reason


def test_unprobed_options_are_counted() -> None:
    unprobed = {name: entry.reason for name, entries in REGISTRY.items()
                for entry in each(entries) if isinstance(entry, Unprobed)}
    assert all(unprobed.values())
    assert len(unprobed) == UNPROBED_EXPECTED, unprobed


# --------------------------------------------------------------------------- the probes


def _cases(kinds: tuple[type, ...]) -> Iterator[object]:
    for name, entries in REGISTRY.items():
        group = each(entries)
        for k, entry in enumerate(group):
            if isinstance(entry, kinds):
                ident = name if len(group) == 1 else f"{name}#{k}"
                marks = [pytest.mark.slow] if name.startswith(SLOW) else []
                yield pytest.param(name, entry, id=ident, marks=marks)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    """The runs of every probe (bases shared), on the inputs of :func:`make_inputs`. The
    admission's model footprint (a model built on the meta device, for every probe of a
    training command) is computed once per model: it depends on nothing else."""
    from gradsched.workloads import footprint

    inputs = tmp_path_factory.mktemp("inputs")
    make_inputs(inputs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(footprint, "footprint", functools.lru_cache(footprint.footprint))
        yield Runner(tmp_path_factory.mktemp("runs"), inputs)


@pytest.mark.parametrize(("name", "entry"), list(_cases((Probe, Output))))
def test_option_is_honoured_or_refused(name: str, entry: Probe | Output,
                                       runner: Runner) -> None:
    verdict = judge(entry, spellings(ACTIONS[name]), runner)
    expected = entry.expect if isinstance(entry, Probe) else "writes"
    assert verdict.kind == expected, f"{name}: {verdict.kind}: {verdict.detail}"


@pytest.mark.parametrize(("name", "entry"), list(_cases((CoveredBy,))))
def test_covering_test_exists_and_names_the_option(name: str, entry: CoveredBy) -> None:
    source = covering_source(entry.test)  # LookupError: no such file or test
    assert any(s in source for s in ACTIONS[name].option_strings), \
        f"{entry.test} does not mention {name}"
    assert entry.reason


# --------------------------------------------------------------------------- planted regressions


def plant(monkeypatch: pytest.MonkeyPatch, words: tuple[str, ...], dest: str,
          value: object) -> None:
    """Make the command ``words`` ignore option ``dest``: its parsed value is replaced by
    ``value`` (its default) before the command runs."""
    real = cli.build_parser

    def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
        parser = real(argv)
        parse = parser.parse_args

        def parse_args(args: list[str] | None = None,
                       namespace: argparse.Namespace | None = None) -> argparse.Namespace:
            parsed = parse(args, namespace)
            if args is not None and tuple(args[:len(words)]) == words:
                setattr(parsed, dest, value)
            return parsed

        parser.parse_args = parse_args  # type: ignore[method-assign]
        return parser

    monkeypatch.setattr(cli, "build_parser", build_parser)


PLANTED = [  # (option, its dest, its default)
    ("replay --channels", "channels", 1),
    ("fit --folds", "folds", None),
    ("advise --margin-pct", "margin_pct", None),
    ("report table --title", "title", ""),
    ("shard compare --memory-cap", "memory_cap", None),
    ("replay --launch-queue", "launch_queue", None),  # a refusal no longer made
    ("run --iters", "iters", 20),  # a command that starts ranks
]


@pytest.mark.parametrize(("name", "dest", "default"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_command_that_ignores_its_option_is_caught(name: str, dest: str, default: object,
                                                     runner: Runner,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    entry = next(e for e in each(REGISTRY[name]) if isinstance(e, Probe))
    assert judge(entry, spellings(ACTIONS[name]), runner).kind == entry.expect
    words = tuple(command_and_option(name)[0].split())
    plant(monkeypatch, words, dest, default)
    fresh = Runner(runner.root.parent / f"planted-{dest}", runner.inputs)
    verdict = judge(entry, spellings(ACTIONS[name]), fresh)
    assert verdict.kind == "ignored", verdict


def test_an_output_option_written_elsewhere_is_caught(runner: Runner,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``advise --json`` planted to be dropped: nothing appears at its path."""
    entry = REGISTRY["advise --json"]
    assert isinstance(entry, Output)
    plant(monkeypatch, ("advise",), "json", None)
    fresh = Runner(runner.root.parent / "planted-json", runner.inputs)
    assert judge(entry, spellings(ACTIONS["advise --json"]), fresh).kind == "ignored"
