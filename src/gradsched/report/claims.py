"""The README's claims with their numbers, from the same macros as the paper.

``paper/generated/claims.md`` is written from ``paper/generated/macros.tex``, so the
README (which points here and quotes no number itself) and the paper cannot disagree.
A macro the pipeline could not compute prints ``n/a``.
"""

from __future__ import annotations

import re
from pathlib import Path

from gradsched.errors import InputError
from gradsched.io import write_text_atomic
from gradsched.report.macros import parse_macros

TEMPLATE = """# Claims and their numbers (generated from paper/generated/macros.tex)

1. **Cost models.** Over {NumCommTraces} collective timing series, the median held-out
   error is {MedianHeldoutMapePiecewise} % for the piecewise model,
   {MedianHeldoutMapeInterp} % for interpolation and {MedianHeldoutMapeAlphaBeta} % for one
   alpha-beta line. Every model is clipped to the wire (no message faster than the sustained
   bandwidth).
2. **The real pairing.** On {HeadlineTrace} over {HeadlineNetwork} at P = {HeadlineWorldSize}
   (forward assumed 0.5 x backward; the trace did not measure it), the fastest schedule is
   {HeadlineFastest}, {HeadlineFastestSpeedupOverWfbp}x faster than WFBP (MG-WFBP:
   {HeadlineMgwfbpSpeedupOverWfbp}x) and {HeadlineGapToLbPct} % above the lower bound, a bound
   that holds for any plan and ready order.
3. **MG-WFBP.** Over {NumCasesMgwfbpContig} replayed cases MG-WFBP is at most
   {MgwfbpContigGapMaxPct} % (median {MgwfbpContigGapMedianPct} %) above the exact optimum of
   its own family (contiguous all-reduce buckets, `contiguous_optimum`) and at most
   {MgwfbpSearchGapMaxPct} % (median {MgwfbpSearchGapMedianPct} %) above the best plan
   `search` finds in any family. The largest speedup over WFBP in any case is
   {MaxSpeedupOverWfbp}x ({MaxSpeedupOverWfbpAlgorithm}).
4. **Reproduced vs published.** {CompareNumWithin} of {CompareNumChecked} checks fall within
   their tolerance ({CompareNumSkipped} skipped).
5. **Re-execution.** Over {ReexecNumCases} CPU cases run for real (gloo, 21 timed iterations
   per plan, bootstrap {ReexecCiLevel} % intervals), the replay's median error is
   {ReexecMedianErrInt} %; of {ReexecAllPairs} plan pairs the measurements separate
   {ReexecSepPairs}, and the replay orders {ReexecOrderOkSep} % of those right. The plan of
   `best` measured {ReexecBestVsDefaultMin}-{ReexecBestVsDefaultMax}x as fast as PyTorch
   DDP's default (at least 1.10x in {ReexecBestTenPctCases} cases) and
   {ReexecBestVsTunedMin}-{ReexecBestVsTunedMax}x as fast as DDP with its best cap (not
   slower within the intervals in {ReexecBestNotSlowerTunedCases} of {ReexecCommCases}
   communication-bound cases).
6. **Architectures, for real.** On the emulated cluster, hierarchical all-reduce took
   {ArchHierFlatOnegbitMeas} (predicted {ArchHierFlatOnegbitPred}) of the flat ring's time at
   1 Gbit/s between nodes and {ArchHierFlatOneZeroZerombitMeas} (predicted
   {ArchHierFlatOneZeroZerombitPred}) at 100 Mbit/s; one parameter server with two workers
   took {ArchPsFlatOnegbitMeas} (predicted {ArchPsFlatOnegbitPred}) and
   {ArchPsFlatOneZeroZerombitMeas} (predicted {ArchPsFlatOneZeroZerombitPred}) of the flat
   all-reduce.
7. **GPU generations.** PyTorch DDP's default plan leaves a median
   {GenKEightZeroDdpExposedMedianPct} % of the iteration as exposed communication on the real
   K80 cluster, {GenVOneZeroZeroDdpExposedMedianPct} % on the V100 cases,
   {GenAOneZeroZeroGhTwoZeroZeroDdpExposedMedianPct} % on A100/GH200 and
   {GenHTwoZeroZeroDdpExposedMedianPct} % (up to {GenHTwoZeroZeroDdpExposedMaxPct} %) with
   our own H200 compute on the Hopper sweeps (A3-Mega H100, Alps GH200; same GPU generation,
   other cluster); the best plan found gains a median {GenKEightZeroBestGainMedianPct} % (K80),
   {GenVOneZeroZeroBestGainMedianPct} % (V100), {GenAOneZeroZeroGhTwoZeroZeroBestGainMedianPct} %
   (A100/GH200) and {GenHTwoZeroZeroBestGainMedianPct} % (H200, up to
   {GenHTwoZeroZeroBestGainMaxPct} %) over DDP's default. The H200 captures'
   per-layer hooks slowed host-bound models by up to {CaptureHookOverheadMaxPct} %
   ({CaptureHookOverheadMaxTrace}), so those rows overstate compute.
"""

_FIELD = re.compile(r"\{([A-Za-z]+)\}")


def render_claims(macros: dict[str, str]) -> str:
    """The template with every ``{Name}`` replaced by macro ``Name`` (``n/a`` if absent)."""
    def value(match: re.Match[str]) -> str:
        text = macros.get(match.group(1), "n/a")
        return text.replace("\\,", " ").replace("\\_", "_").replace("$\\times$", "x")

    return _FIELD.sub(value, TEMPLATE)


def write_claims(macros_tex: str | Path, out: str | Path) -> None:
    """Read the paper's macros and write the claims Markdown atomically."""
    path = Path(macros_tex)
    if not path.is_file():
        raise InputError("macros file not found (run the pipeline first)", path=path)
    write_text_atomic(out, render_claims(parse_macros(path.read_text(encoding="utf-8"))))
