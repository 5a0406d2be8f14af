r"""No result typed by hand: every digit in the paper's prose (paper/sections/*.tex) is a
macro's, or matches one entry of an explicit allow-list of numbers that are not results.

What counts as a result: anything the pipeline measured, fitted, replayed or counted, or
derived from those (sizes of a trace's gradients, times, ratios, percentages, counts of
cases or tensors). Those come from ``\gs...`` macros (``gradsched report macros``, the
scaling check's macros), and a digit among them fails this test.

What stays typed (:data:`ALLOWED`, one pattern per reason):

* names: models, GPUs, software and files whose name holds a digit (ResNet-50, A100-SXM4,
  fp32, \texttt{p2p}, GPT-Neo 2.7B, LL128, p10) and the network keys (\emph{1gbit});
* years and version strings of the software used (torch 2.14, SLURM 22.05.8);
* inputs of an experiment, set before it ran: world sizes ($P=8$, ``2 ranks'', ``4 nodes'',
  ``8 GPUs''), batch sizes and tokens, seeds, iterations, folds, cores and threads, the link
  rates the emulation shapes (1\,Gbit/s) or a source's network (10\,Gb Ethernet), message
  sizes of a sweep (powers of two), DDP's bucket caps (torch's 25\,MiB default, 1\,MiB first
  bucket, and the explicit caps the experiments set), stated tolerances of a check;
* hardware as a source names it (8$\times$A100, GPU memory in GB, 8 H100);
* formulas: math with a variable ($2(P-1)/P$, $c_0$, $1/s_c$) and enumeration labels (1);
* :data:`QUOTED`: a handful of exact phrases whose numbers are settings of a published
  algorithm or numbers another paper reports, each with its reason.

:data:`PENDING` lists the sentences another change rewrites (the claims: best against DDP,
compression accuracy); they are not allowed, only waiting, and
:func:`test_pending_sentences_still_exist` fails once one is gone so that the list shrinks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECTIONS = REPO / "paper" / "sections"


@dataclass(frozen=True)
class Allowed:
    """Numbers matched by ``pattern`` (and accepted by ``check``, given the match) are not
    results, for ``reason``."""

    pattern: str
    reason: str
    check: Callable[[re.Match], bool] | None = None


def _powers_of_two(match: re.Match) -> bool:
    """Every number in the match is a power of two (sweep and message sizes)."""
    values = [int(v) for v in re.findall(r"\d+", match.group(0))]
    return all(v > 0 and v & (v - 1) == 0 for v in values)


DDP_CAPS_MB = {1, 5, 10, 25, 50, 100}
"""Bucket caps the experiments set: torch's default 25 MiB with its 1 MiB first bucket
(torch/nn/parallel/distributed.py), the re-execution's explicit caps (config/reexec.yaml:
1, 5, 10, 25, 50) and the bucket test's 100 MiB (tests/planners/test_ddp.py)."""


def _ddp_caps(match: re.Match) -> bool:
    return all(int(v) in DDP_CAPS_MB for v in re.findall(r"\d+", match.group(0)))


_NUM = r"\d+(?:\.\d+)?-?"
_LIST = rf"{_NUM}(?:\s*(?:,|--|\.\.|\band\b|\bor\b|\bto\b)\s*{_NUM})*"
_COUNTED = (r"ranks?|nodes?|GPUs?|workers?|servers?|seeds?|steps?|iterations?|threads?|"
            r"cores?|CPUs?|tokens|fold|namespaces?|processes|message sizes|rounds?")
_QUALIFIER = r"(?:(?:gloo|MPI|timed|ABCI [AV]-)\s*)?"

ALLOWED: tuple[Allowed, ...] = (
    Allowed(r"\b(?:19|20)\d\d\b", "a year"),
    Allowed(r"\b\d+\.\d+\.\d+\b", "a version string (SLURM 22.05.8, Snakemake 9.27.1)"),
    Allowed(r"\b(?:torch|OMB|Python)\s+\d+\.\d+\b", "a two-part version of named software"),
    Allowed(r"\b\d+(?:\.\d+)?[BM]\b", "a parameter count in a model's name (GPT-Neo 2.7B)"),
    Allowed(r"\b\d+[mg]bit\b", "a network key of gradsched.networks (1gbit, 100mbit)"),
    Allowed(r"\$P\s*=\s*\d+\$(?:\s*(?:\.\.|,|--|to|and)\s*\$?\d+\$?)*",
            "a world size, an input of the experiment ($P=16$ to 128)"),
    Allowed(rf"(?<![\w.]){_LIST}\s*(?:~|\s|-)?\s*{_QUALIFIER}(?:{_COUNTED})\b",
            "a count of what an experiment or a source ran on (2 and 4 nodes, 3 seeds, "
            "10 iterations, 4-, 8- and 16-node, 2-core, 5-fold)"),
    Allowed(r"\$\s*\\times\s*\$\s*\d+\s+ranks", "ranks per node, an input"),
    Allowed(r"\b(?:world\s+sizes?|micro-batch|batch(?:\s+size)?(?:\s+of)?)\s+\d+"
            r"(?:\s+and\s+\d+)?",
            "a batch or world size set by the experiment or the source"),
    Allowed(r"\$\d+\{?\\times\}?\d+\$\s+images", "an input image size"),
    Allowed(r"\$\d+\s*\\times\s*\d+\$\s+(?:HSDP\s+)?mesh\b",
            "a device mesh's shape (replicas x shard group), an input of the experiment"),
    Allowed(r"sequence length\s*\(\d+\)", "the sequence length a source trains with"),
    Allowed(r"\b\d+(?:\\,)?\s*(?:Gbit/s|Mbit/s|Gb\s+Ethernet)",
            "a link rate: set by the emulation, or a source's network"),
    Allowed(r"(?<![\w.])\d+(?:\s*(?:,|--|and|to)\s*\d+)*\\,\s*(?:B|KiB|MiB|GiB)"
            r"(?:\s*(?:--|to)\s*\d+\\,\s*(?:B|KiB|MiB|GiB))?\b",
            "a message size of a sweep (a power of two)", _powers_of_two),
    Allowed(r"(?<![\w.])(?:\d+,\s*)*\d+(?:,?\s+and\s+\d+)?(?:\\,)?\s*(?:MiB|MB)\b",
            "a DDP bucket cap set by the experiment or torch's default", _ddp_caps),
    Allowed(r"\b\d+\\,GB\b(?!/s)", "GPU memory as the vendor names the part (not a rate)"),
    Allowed(r"(?<![\w.])\d+\s*(?:\$\\times\$)?\s*(?=(?:[A-Z]+[A-Za-z]*-?\d|RTX|InfiniBand))",
            "a count of hardware named by its source (8$\\times$A100, 16 H100, 4$\\times$"
            "InfiniBand)"),
    Allowed(r"\bRTX\s+\d+\b", "a GPU's model number (RTX 4090)"),
    Allowed(r"tolerance\s+(?:of\s+)?\d+(?:\.\d+)?\\,\\%", "a stated tolerance of a check"),
    Allowed(r"\b\d+(?:st|nd|rd|th)\b", "an ordinal (10th percentile)"),
    Allowed(r"(?<![\w$])\(\d\)(?=\s)", "an enumeration label"),
    Allowed(r"10\^\{?\d+\}?", "a power of ten in a published algorithm's setting"),
    Allowed(r"(?:excludes|close to|below|above)\s+1\b(?![.,]\d)",
            "the ratio 1 (equal times): the reference a speed-up is compared with"),
)
"""Applied in this order, before formulas and names (so that a pattern can see the
``\\,`` and ``$\\times$`` around its number)."""

NAME = Allowed(r"\b[A-Za-z][A-Za-z0-9]*(?:[-./][A-Za-z0-9]+)*",
               "a name holding a digit (ResNet-50, A100-SXM4-40GB, fp32, p10--p90, v1.5)",
               lambda match: any(ch.isdigit() for ch in match.group(0)))
"""Applied last, after macro names are gone."""

QUOTED: tuple[tuple[str, str], ...] = (
    (r"forward $0.5\times$ backward", "the forward-time assumption, a setting of the replay"),
    (r"ahead of both at 0.5 and 1", "the forward-time assumptions replayed"),
    (r"a density of 1/64", "a density the compression experiment sweeps (its config)"),
    (r"at 1/256 importance-weighted", "a density the compression experiment sweeps"),
    (r"report 64$\times$ and 58.8$\times$ compression", "numbers Cheng and Xu report"),
    (r"partitions of 4\,MB", "BytePS's default partition (byteps/common/global.cc, "
     "costmodel/ps.py DEFAULT_PARTITION_BYTES)"),
    (r"10 steps over [1, 256]\,MiB", "DeAR's tuner settings (its paper)"),
    (r"50{,}000-parameter slices", "P3's slice size (its paper)"),
    (r"$[4, 64]\cdot10^6$", "ByteScheduler's credit search range (its plugin)"),
    (r"forward $= 0.5\times$", "the forward-time assumption, a setting of the replay"),
    (r"assumed as 0, 0.5 (the default, the MG-WFBP simulator's assumption) and 1 times",
     "the forward-time assumptions replayed"),
    (r"ranking at 0, 0.5 and 1.", "the forward-time assumptions replayed"),
    (r"at 0 and 1 as well", "the forward-time assumptions replayed"),
    (r"(1 for all-reduce,", "a constant of the formula (f_c)"),
    (r"With density 1 each", "the density that means no compression (a definition)"),
    (r"32, 128 for the A-nodes, skipping the anomalous 64", "which sweeps the fit uses (config)"),
    (r"fitted at 4 (an", "the sweep's world size the fit uses (config)"),
    (r"21 per plan", "3 rounds x 7 iterations, settings of the experiment"),
    (r"at least 0.25 cores", "the load threshold of the experiment (a setting)"),
    (r"published $-$ 1.", "a formula (error = predicted / published - 1)"),
    (r"Llama~3.1 8B/70B/405B, Llama~2 70B, Mixtral 8x7B", "model names (committed configs)"),
    (r"Llama~2 70B", "a model's name"),
    (r"(Section~4)", "the section of the cited paper"),
    (r"bytes at 16 bits", "the cited paper's activation precision (Korthikanti et al.)"),
    (r"16~bytes read and 12 written", "what PyTorch's fused Adam reads and writes (its code)"),
    (r"(A100 80\,GB 2.04\,TB/s, H100 SXM 3.35\,TB/s, H100 NVL 3.9\,TB/s, GH200 4\,TB/s, "
     r"H200 4.8\,TB/s)", "the GPUs' datasheet bandwidths (gradsched.gpus, with sources)"),
    (r"EFA between nodes, 3.2\,Tbit/s per node", "the network as AWS describes it (source)"),
    (r"CUDA\_DEVICE\_MAX\_CONNECTIONS=1", "an environment variable's setting (Megatron-LM)"),
    (r"rank~0", "a rank's number (which trace)"),
    (r"rank 0", "a rank's number (which trace)"),
    (r"\texttt{5e85bd62d}", "the llm-foundry commit that added the benchmark table and its "
     "launch script (a citation; data/external/at-scale/README.md)"),
    (r"about 320\,GB/s at 16 nodes and 280\,GB/s at 64", "the reduce-scatter bus bandwidths "
     "a public NCCL issue thread reports (data/external/nccl-issue-1229/)"),
    (r"an all-gather of 2\,GB on 32 nodes reported, as a disappointing result, at "
     r"200\,GB/s bus bandwidth", "a size and a bus bandwidth a public NCCL issue thread "
     "reports (its URL in the sentence)"),
    (r"$k = 32$ channels the model gives the HGX H100 node",
     "the channel count of the NCCL model's h100-8x400g preset (costmodel/nccl/tuning.py "
     "runtime_channels), a setting of the model, not a result"),
    (r"$N = 132$ SMs", "the H100 SXM's SM count (a hardware fact)"),
    (r"--mesh 2x2", "the mesh shape given to the advisor (an input)"),
)

PENDING: tuple[tuple[str, str], ...] = (
)
"""Claims another change rewrites (paper/sections/reexec.tex's best-vs-DDP sentences, the
compression accuracy sentences): not allowed, only skipped until that change is merged."""

_SKIPPED_COMMANDS = re.compile(
    r"\\(?:cite[tp]?|ref|eqref|autoref|label|input|include|url|includegraphics|"
    r"bibliography|bibliographystyle|providecommand|newcommand|renewcommand)\*?"
    r"(?:\[[^\]]*\])*\{(?:[^{}]|\{[^{}]*\})*\}(?:\{(?:[^{}]|\{[^{}]*\})*\})?")
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[^}]*\}(?:\[[^\]]*\])?(?:\{[^}]*\})?")
_COMMENT = re.compile(r"(?<!\\)%.*")
_MATH = re.compile(r"\$[^$]*\$")


def _blank(text: str, start: int, end: int) -> str:
    """``text`` with ``[start, end)`` replaced by spaces (newlines kept, so that offsets and
    line numbers stay those of the file)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _blank_all(text: str, pattern: re.Pattern | str,
               check: Callable[[re.Match], bool] | None = None) -> str:
    for match in reversed(list(re.finditer(pattern, text))):
        if check is None or check(match):
            text = _blank(text, match.start(), match.end())
    return text


def _is_formula(match: re.Match) -> bool:
    """Math with a variable or an operator other than \\times is a formula, not a number."""
    body = match.group(0)[1:-1].replace(r"\times", "")
    return bool(re.search(r"[A-Za-z]", body))


def phrase_pattern(phrase: str) -> str:
    """``phrase`` as a regex in which any run of white space matches any other (a phrase
    may wrap across lines)."""
    return r"\s+".join(re.escape(word) for word in phrase.split())


def _quoted(text: str, phrases: tuple[str, ...]) -> str:
    for phrase in phrases:
        text = _blank_all(text, phrase_pattern(phrase))
    return text


def typed_numbers(text: str, pending: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    """(line, context) of every digit in ``text`` that no macro, allow-list entry or
    quoted phrase accounts for."""
    text = _blank_all(text, _COMMENT)
    text = _quoted(text, tuple(phrase for phrase, _ in QUOTED) + pending)
    text = _blank_all(text, _SKIPPED_COMMANDS)
    text = _blank_all(text, _ENVIRONMENT)
    for rule in ALLOWED:
        text = _blank_all(text, rule.pattern, rule.check)
    text = _blank_all(text, _MATH, _is_formula)
    text = _blank_all(text, r"\\[A-Za-z]+")  # macro names (letters only, no digits)
    text = _blank_all(text, NAME.pattern, NAME.check)
    found = []
    original_lines = text.splitlines()
    for match in re.finditer(r"\d+(?:[.,]\d+)*", text):
        line = text.count("\n", 0, match.start()) + 1
        found.append((line, f"{match.group(0)!r} in {original_lines[line - 1].strip()!r}"))
    return found


def section_files() -> list[Path]:
    return sorted(SECTIONS.glob("*.tex"))


def _pending(path: Path) -> tuple[str, ...]:
    return tuple(fragment for name, fragment in PENDING if name == path.name)


@pytest.mark.parametrize("path", section_files(), ids=lambda p: p.name)
def test_no_result_typed_in_a_section(path: Path) -> None:
    found = typed_numbers(path.read_text(encoding="utf-8"), _pending(path))
    assert not found, (f"{path.relative_to(REPO)}: numbers typed by hand (use a macro from "
                       "`gradsched report macros`, or allow-list a non-result with its "
                       "reason): " + "; ".join(f"line {n}: {c}" for n, c in found))


def test_pending_sentences_still_exist() -> None:
    """Each pending sentence is still in its file; once rewritten, drop it from PENDING."""
    for name, fragment in PENDING:
        text = (SECTIONS / name).read_text(encoding="utf-8")
        assert re.search(phrase_pattern(fragment), text), (
            f"{name} no longer has {fragment!r}: remove it from PENDING")


def test_quoted_phrases_are_in_the_paper() -> None:
    """An allowed phrase that no section holds any more is a stale exception."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in section_files())
    stale = [phrase for phrase, _ in QUOTED if not re.search(phrase_pattern(phrase), text)]
    assert not stale, f"QUOTED phrases no longer in paper/sections: {stale}"


@pytest.mark.parametrize("sentence", [
    # the reviewer's examples: the wrong bus bandwidth and the re-execution's sizes and times
    r"our links measured 30.1\,MB/s bus bandwidth for 64\,KiB all-reduces",
    r"ResNet-50 (batch 2; 102\,MB of gradients, 0.8\,s on a 1\,Gbit/s link)",
    r"falls behind on ResNet-50 (161 tensors) at $P=512$",
    r"its tensors (up to 511\,MiB) lie beyond",
    r"the replay's median error is 4.2\,\% on 2 ranks",
    r"the best plan was $1.25\times$ as fast",
    r"best measured 1.12 times as fast as DDP",
    r"a gap of 3 of 9 cases",
    # a rate is not GPU memory; a mesh shape is allowed only as a mesh's
    r"an implied bus bandwidth of 43\,GB/s at 32 nodes",
    r"a slowdown of $1 \times 2$ at most",
])
def test_a_typed_result_fails(sentence: str) -> None:
    assert typed_numbers(sentence), f"not caught: {sentence!r}"


@pytest.mark.parametrize("sentence", [
    r"\gsTraceResnetFiveZeroBTwoCpuFpThreeTwoGradMB\,MB on a 1\,Gbit/s link",
    r"ResNet-50 on 2 and 4 nodes of 8 GPUs ($P=16$ to 128), batch 16, fp32, torch 2.14",
    r"caps 1, 25, 100\,MiB and messages of 4\,B--32\,MiB (tolerance 0.5\,\%)",
    r"the ring moves $2(P-1)/P\cdot M$ bytes~\cite{li2020ddp} (Section~\ref{sec:gpu2})",
    r"% a comment with 12.3 in it",
])
def test_a_non_result_passes(sentence: str) -> None:
    assert not typed_numbers(sentence)
