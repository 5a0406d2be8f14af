"""The README's repository layout names every rule file of the workflow, and its command
table stays the short list a newcomer needs (the rest is ``gradsched VERB --help``)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def layout_block(readme: str) -> str:
    """The fenced block under the README's "Repository layout" heading."""
    match = re.search(r"^## Repository layout\n.*?^```\n(.*?)^```", readme, flags=re.M | re.S)
    assert match, "README.md has no fenced block under '## Repository layout'"
    return match.group(1)


def missing_rule_files(readme: str, rules: list[str]) -> list[str]:
    """The rule files of ``rules`` that the layout block does not name."""
    named = set(re.findall(r"\b([a-z_]+\.smk)\b", layout_block(readme)))
    return [name for name in rules if name not in named]


def test_the_layout_names_every_rule_file() -> None:
    rules = sorted(p.name for p in (REPO / "workflow" / "rules").glob("*.smk"))
    assert rules, "no workflow/rules/*.smk"
    missing = missing_rule_files((REPO / "README.md").read_text(encoding="utf-8"), rules)
    assert not missing, f"README.md's repository layout does not name {missing}"


def test_a_rule_file_left_out_of_the_layout_is_found() -> None:
    readme = "## Repository layout\n\n```\nworkflow/rules/\n  common.smk  shared\n```\n"
    assert missing_rule_files(readme, ["common.smk", "replay.smk"]) == ["replay.smk"]


def test_the_command_table_is_short_and_points_to_help() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Command line\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert 0 < len(rows) <= 10, f"{len(rows)} rows: the table is for a newcomer, not a manual"
    assert "gradsched --help" in section and "--help" in section
