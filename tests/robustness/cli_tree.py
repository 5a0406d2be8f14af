"""The option tree of ``gradsched.cli``'s parser, walked: shared by the option tests
(``test_options.py`` checks the numeric types, ``test_every_option.py`` that no option is
ignored)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator


def options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
            ) -> Iterator[tuple[str, argparse.Action]]:
    """``(command path + option, action)`` for every option and positional argument of
    ``parser`` and of every sub-command below it; an option is named by its longest
    spelling (``replay --output``), a positional argument by its dest (``fit traces``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from options(sub, (*path, name))
        elif action.option_strings or action.dest != "help":
            yield " ".join((*path, max(action.option_strings or [action.dest], key=len))), action


def command_and_option(name: str) -> tuple[str, str]:
    """``"report figure gaps --png"`` -> ``("report figure gaps", "--png")``; a positional
    argument's name is its last word (``"fit traces"`` -> ``("fit", "traces")``)."""
    command, _, option = name.rpartition(" ")
    return command, option
