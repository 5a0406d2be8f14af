"""The command-line parser: ``run`` takes torch's default bucket cap as ``default``."""

from __future__ import annotations

from gradsched.cli import build_parser


def test_run_takes_torchs_default_cap() -> None:
    args = build_parser().parse_args(["run", "--baseline", "ddp", "--bucket-cap-mb", "default",
                                      "--bucket-cap-mb", "2.5", "--model", "tiny-mlp",
                                      "--batch-size", "4", "--world-size", "2", "-o", "x.csv"])
    assert args.bucket_cap_mb == [None, 2.5]


def test_verb_table_is_what_the_command_modules_register() -> None:
    """cli.VERB_MODULES (a run loads only its verb's module) names, for every verb the full
    parser has, the module that registers it, and a verb's parser is the full parser's."""
    import argparse

    from gradsched import cli

    found = {}
    for name in cli.command_modules():
        sub = argparse.ArgumentParser().add_subparsers()
        __import__(f"gradsched.commands.{name}", fromlist=["register"]).register(sub)
        found.update(dict.fromkeys(sub.choices, name))
    assert found == cli.VERB_MODULES
    full = build_parser()._subparsers._group_actions[0].choices
    for verb in cli.VERB_MODULES:
        alone = build_parser([verb])._subparsers._group_actions[0].choices
        module = cli.VERB_MODULES[verb]
        assert set(alone) == {v for v, m in cli.VERB_MODULES.items() if m == module}
        assert alone[verb].format_help() == full[verb].format_help()


def test_an_unknown_first_word_gets_the_full_parser() -> None:
    from gradsched import cli

    assert cli.command_modules(["--help"]) == cli.command_modules()
    assert cli.command_modules(["replya"]) == cli.command_modules()
    assert cli.command_modules(["fit", "x.csv"]) == ["fit"]
