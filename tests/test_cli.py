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


def test_the_verb_help_is_what_the_command_modules_register() -> None:
    from gradsched import cli

    full = build_parser()._subparsers._group_actions[0]
    registered = {action.dest: action.help for action in full._choices_actions}
    assert registered == cli.VERB_HELP


def test_a_command_line_without_a_verb_lists_the_verbs_and_loads_no_command() -> None:
    """``gradsched --help``, a typo, nothing: the verbs and their help, from the table, in a
    process that never imports a command module, pandas, numpy or torch."""
    import subprocess
    import sys

    code = ("import sys\nfrom gradsched.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'numpy', 'scipy', 'matplotlib', 'torch') or "
            "m.startswith('gradsched.commands.') and not m.split('.')[-1].startswith('_'))\n"
            "print('LOADED', heavy, file=sys.stderr)\n")
    for argv in (["--help"], ["replya"], []):
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                              text=True, timeout=60)
        assert "LOADED []" in proc.stderr, (argv, proc.stderr[-2000:])
    listed = subprocess.run([sys.executable, "-m", "gradsched", "--help"], capture_output=True,
                            text=True, timeout=60).stdout
    from gradsched import cli

    assert all(f"    {verb}" in listed for verb in cli.VERB_HELP)
