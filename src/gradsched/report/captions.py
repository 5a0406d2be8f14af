"""Report captions from the paper's own captions.

``snakemake --report`` shows every figure and table of the paper; its caption for each is the
caption ``paper/main.tex`` gives it, turned into plain reStructuredText here. The committed
files under ``workflow/report/captions/`` are regenerated with
``gradsched report captions paper/main.tex -o workflow/report/captions`` and a test checks
that they still equal what the paper says, so the report and the paper cannot disagree.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gradsched.errors import InputError
from gradsched.io import read_text, write_text_atomic

_ENV = re.compile(r"\\begin\{(figure|table|sidewaystable|sidewaysfigure)\*?\}(.*?)"
                  r"\\end\{\1\*?\}", re.S)
_ITEM = re.compile(r"\\(?:includegraphics(?:\[[^\]]*\])?|input)\{(?:figures|tables)/"
                   r"([^}./]+)(?:\.[a-z]+)?\}")


def _braced(text: str, start: int) -> str:
    """The contents of the brace group opening at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    raise InputError("unbalanced braces in a caption")


def to_plain(tex: str) -> str:
    """A caption's LaTeX as plain text (the markup the paper's captions use)."""
    text = re.sub(r"(?:Sections?|Tables?|Figures?)~\\ref\{[^}]*\}", "the paper", tex)
    text = re.sub(r"\\(?:ref|label|cite|citet|citep)\{[^}]*\}", "", text)
    text = re.sub(r"\\(?:alg|texttt|emph|textbf|mathrm|text)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\$([^$]*)\$", r"\1", text)
    for old, new in (("~", " "), (r"\,", " "), ("``", '"'), ("''", '"'), (r"\%", "%"),
                     (r"\_", "_"), (r"\times", "x"), (r"\pm", "+/-"), ("--", "-"),
                     (r"\&", "&"), ("\\", "")):
        text = text.replace(old, new)
    text = re.sub(r"[{}]", "", text)
    text = re.sub(r"\(\s*\)", "", text)
    return re.sub(r"\s+", " ", text).strip()


_SECTION = re.compile(r"\\input\{(sections/[^}]+)\}")


MAX_INPUT_DEPTH = 8


def paper_source(main_tex: str | Path) -> str:
    """``main.tex`` with every ``\\input{sections/...}`` replaced by that file's text,
    nested inputs included."""
    path = Path(main_tex)
    if not path.is_file():
        raise InputError("paper source not found", path=path)

    def inline(match: re.Match[str]) -> str:
        name = match.group(1)
        part = path.parent / (name if name.endswith(".tex") else f"{name}.tex")
        if not part.is_file():
            raise InputError(f"\\input{{{name}}}: file not found", path=path)
        return read_text(part, universal_newlines=True)

    text = read_text(path, universal_newlines=True)
    for _ in range(MAX_INPUT_DEPTH):
        if not _SECTION.search(text):
            return text
        text = _SECTION.sub(inline, text)
    raise InputError(f"\\input nesting deeper than {MAX_INPUT_DEPTH}", path=path)


def paper_captions(main_tex: str | Path) -> dict[str, str]:
    """Figure or table file stem -> its caption as plain text, for every float of the paper
    (sections included)."""
    source = paper_source(main_tex)
    out: dict[str, str] = {}
    for match in _ENV.finditer(source):
        body = match.group(2)
        at = body.find(r"\caption{")
        if at < 0:
            continue
        caption = to_plain(_braced(body, at + len(r"\caption")))
        for name in _ITEM.findall(body):
            out[name] = caption
    return out


TEMPLATES = (
    ("tables.rst", "table", ""),
    ("replay-vs-world-size.rst", "family", "replay-vs-world-size-"),
    ("replay-family-tables.rst", "family", "replay-"),
)
"""Jinja captions of rules with a wildcard (file, wildcard, prefix of the caption names):
Snakemake renders report captions with the ``snakemake`` object, so the wildcard picks the
paper's caption of ``prefix + value``."""


def wildcard_template(captions: dict[str, str], wildcard: str, prefix: str) -> str:
    """A Jinja caption: the paper caption of ``prefix + snakemake.wildcards[wildcard]``."""
    mapping = ", ".join(f"{json.dumps(n[len(prefix):])}: {json.dumps(c)}"
                        for n, c in sorted(captions.items()) if n.startswith(prefix))
    key = f"snakemake.wildcards.{wildcard}"
    return "{% set c = {" + mapping + "} %}{{ c.get(" + key + ", " + key + ") }}\n"


def write_captions(main_tex: str | Path, out_dir: str | Path) -> list[Path]:
    """One ``<name>.rst`` per figure and table in ``out_dir``, and the wildcard rules'
    templates (:data:`TEMPLATES`) in its parent; atomically."""
    captions = paper_captions(main_tex)
    written = []
    for name, caption in sorted(captions.items()):
        target = Path(out_dir) / f"{name}.rst"
        write_text_atomic(target, caption + "\n")
        written.append(target)
    for filename, wildcard, prefix in TEMPLATES:
        target = Path(out_dir).parent / filename
        write_text_atomic(target, wildcard_template(captions, wildcard, prefix))
        written.append(target)
    return written
