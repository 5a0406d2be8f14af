"""The claims of docs/claims.md with their numbers, from the same macros as the paper.

``paper/generated/claims.md`` is written from ``paper/generated/macros.tex``, so the claims
page (``docs/claims.md``: it points here and quotes no number itself) and the paper cannot
disagree.
A macro the pipeline could not compute prints ``n/a``.
"""

from __future__ import annotations

import re
from pathlib import Path

from gradsched.errors import InputError
from gradsched.io import read_text, write_text_atomic
from gradsched.report.latex import parse_macros

TEMPLATE = """# Claims and their numbers (generated from paper/generated/macros.tex)

1. **Cost models.** Over {NumCommTraces} collective timing series, the median held-out
   error is {MedianHeldoutMapePiecewise} % for the piecewise model,
   {MedianHeldoutMapeInterp} % for interpolation and {MedianHeldoutMapeAlphaBeta} % for one
   alpha-beta line; the piecewise model predicts held-out sizes better than the line on
   {FitsPiecewiseBeatsAlphaBeta} of them and interpolation on {FitsInterpBeatsAlphaBeta}. That
   advantage is the benchmark sweeps': on the real K80 cluster's {FitsKEightNumSeries}
   in-training series (B-Caffe's per-blob times), one alpha-beta line beats interpolation on
   {FitsKEightAlphaBetaBeatsInterp} and the piecewise model on
   {FitsKEightAlphaBetaBeatsPiecewise}. Every model is clipped to the wire (no message faster
   than the sustained bandwidth).
2. **The real pairing.** On {HeadlineTrace} over {HeadlineNetwork} at P = {HeadlineWorldSize}
   (forward assumed 0.5 x backward; the trace did not measure it), the fastest schedule is
   {HeadlineFastest} (schedules within a relative {TieRelTol} of each other tie and are all
   named, joined by "="), {HeadlineFastestSpeedupOverWfbp}x faster than WFBP (MG-WFBP:
   {HeadlineMgwfbpSpeedupOverWfbp}x) and {HeadlineGapToLbPct} % above the lower bound, a bound
   that holds for any plan and ready order. Domain: that trace timed each blob alone, so
   merged buckets are larger than any measured message, and {HeadlineMgwfbpAboveRangePct} % of
   MG-WFBP's modelled communication there is priced above the largest measured size (the
   line of the sweep's upper points; {HeadlineMgwfbpBelowRangePct} % below the smallest).
   Replayed with each fitted comm model of that
   cluster's trace instead (held-out error on it: alpha-beta
   {HeadlineModelAlphaBetaHeldoutMapePct} %, piecewise {HeadlineModelPiecewiseHeldoutMapePct} %,
   interp {HeadlineModelInterpHeldoutMapePct} %), the fastest schedule
   ({HeadlineModelAlphaBetaFastest}, {HeadlineModelPiecewiseFastest},
   {HeadlineModelInterpFastest}) is
   {HeadlineModelsFastestSpeedupOverWfbpMin}-{HeadlineModelsFastestSpeedupOverWfbpMax}x faster
   than WFBP under all three, and MG-WFBP is within
   {HeadlineModelsMgwfbpContigGapPctMax} % of the contiguous optimum under all three; MG-WFBP's
   own speed-up over WFBP is not robust to the model:
   {HeadlineModelAlphaBetaMgwfbpSpeedupOverWfbp}x under alpha-beta,
   {HeadlineModelPiecewiseMgwfbpSpeedupOverWfbp}x under piecewise,
   {HeadlineModelInterpMgwfbpSpeedupOverWfbp}x under interp (`paper/tables/headline-models.md`).
3. **MG-WFBP.** Every maximum, median and range below follows one rule
   (`src/gradsched/report/quote_rule.py`): it rests only on replay rows at a world size a
   sweep measured, on measured compute that is not host-bound, replayed with every
   calibration that exists for their link, and mostly priced inside the message sizes their
   sweep measured (a gap or speed-up needs both of its rows to pass). Left out:
   {NumCasesOutsideDomain} cases ({NumRowsOutsideDomain} rows) with more than
   {DomainMostlyOutsidePct} % of a schedule's modelled communication time outside the
   measured sizes ({NumRowsMostlyBelow} rows mostly below the smallest, e.g. a sweep that
   starts at 1 MiB under per-tensor schedules; {NumRowsMostlyAbove} mostly above the largest,
   e.g. sweeps that stop at 32 MiB under merged buckets; columns `comm_below_range_pct` /
   `comm_above_range_pct` of `results/replay/main/replay.csv`), {NumCasesHostBound} cases of a
   host-bound trace (column `compute_bound_by`), {NumCasesUncalibrated} CPU cases
   ({NumRowsUncalibrated} rows) on the emulated links (loopback, 1 Gbit/s, 100 Mbit/s),
   replayed without the per-collective CPU cost the re-execution calibrated there (quoted
   from the calibrated replay instead), and the world sizes beyond the sweeps (P = 256 and
   512 on the cross-world-size model, which errs by a median {MedianCrossWsMape} %, up to
   {MaxCrossWsMape} %, on the sweeps it did not fit): drawn hollow or shaded in the figures,
   quoted nowhere. Over the {NumCasesMgwfbpContig} cases the rule keeps, MG-WFBP is
   at most {MgwfbpContigGapMaxPct} % (median {MgwfbpContigGapMedianPct} %) above the exact
   optimum of its own family (contiguous all-reduce buckets, `contiguous_optimum`). Its gap
   to `search` (any family) depends on the cost of a collective: with no per-collective
   CPU cost it is at most {MgwfbpSearchGapMaxPct} % (median {MgwfbpSearchGapMedianPct} %);
   with the
   per-collective cost and issue order the re-execution calibrated, of the
   {CalibratedNumCases} CPU cases where a calibration exists {CalibratedNumOutsideDomain} fall
   outside the rule (a schedule mostly priced above the CPU sweep's largest size: merged
   buckets outgrow it), and on the other {CalibratedNumQuoted} it is
   {CalibratedMgwfbpSearchGapMinPct} to {CalibratedMgwfbpSearchGapMaxPct} % (`search`'s plan
   slower in {CalibratedSearchSlowerCases}), with a largest speed-up over WFBP of
   {CalibratedMaxSpeedupOverWfbp}x ({CalibratedMaxSpeedupOverWfbpAlgorithm},
   {CalibratedMaxSpeedupOverWfbpCase}). The largest speed-up over WFBP under the rule is
   {MaxSpeedupOverWfbp}x ({MaxSpeedupOverWfbpAlgorithm}; {MaxSpeedupOverWfbpTrace} on
   {MaxSpeedupOverWfbpNetwork}, P = {MaxSpeedupOverWfbpWorldSize}).
4. **Reproduced vs published.** {CompareSelfNumChecked} of the {CompareNumChecked} checks are
   self-checks of our nccl-tests importer (the bus bandwidth recomputed from the imported rows
   against the average the same log prints): {CompareSelfNumWithin} within
   {CompareSelfTolerancePct} % (largest difference {CompareSelfMaxAbsDiffPct} %); they test the
   parser, not a result. The reproduction of a published measurement, B-Caffe's merged over
   per-blob communication time ({CompareReproNumChecked} GoogleNet runs), does not follow the
   published values: the replay's MG-WFBP/WFBP ratio stays at
   {CompareReproReproducedMin}-{CompareReproReproducedMax} where B-Caffe measured
   {CompareReproPublishedMin}-{CompareReproPublishedMax}; {CompareReproNumWithin} of
   {CompareReproNumChecked} fall within the coarse {CompareReproTolerancePct} % tolerance
   (largest difference {CompareReproMaxAbsDiffPct} %). {CompareNumSkipped} checks skipped.
5. **Re-execution.** Over {ReexecNumCases} CPU cases run for real (gloo, 21 timed iterations
   per plan, bootstrap {ReexecCiLevel} % intervals), the replay's median error is
   {ReexecMedianErrInt} % with two calibrations of the same machine and launch: the
   interference measured there (per-collective CPU cost, slowdowns) and the compute trace
   scaled to a compute-only control of the same launch (scale
   {ReexecComputeScaleMin}-{ReexecComputeScaleMax}). Without the interference calibration it
   is {ReexecMedianErr} %, and the plain replay (neither) errs by {ReexecMedianErrRaw} %. Of
   {ReexecAllPairs} plan pairs the measurements separate
   {ReexecSepPairs}, and the replay orders {ReexecOrderOkSep} % of those right. Speed-ups
   below are T_other / T_best with their intervals; a case counts as faster or slower only
   where the interval excludes 1. Against PyTorch DDP's default: {ReexecBestVsDefaultList}
   (faster in {ReexecBestVsDefaultFasterCases} of {ReexecBestVsDefaultCases}, slower in
   {ReexecBestVsDefaultSlowerCases}). Part of that is our executor, not the schedule: the
   executor running DDP's own buckets measured
   {ReexecExecDdpOverDefaultMin}-{ReexecExecDdpOverDefaultMax}x as fast as PyTorch DDP
   ({ReexecExecDdpOverDefaultList}). Against the executor running DDP's plan, the schedule
   alone: {ReexecBestVsExecDdpList} (faster in {ReexecBestVsExecDdpFasterCases} of
   {ReexecBestVsExecDdpCases}, slower in {ReexecBestVsExecDdpSlowerCases}). Against PyTorch
   DDP at its fastest measured cap: {ReexecBestVsTunedCapList} (faster in
   {ReexecBestVsTunedCapFasterCases} of {ReexecBestVsTunedCapCases}, slower in
   {ReexecBestVsTunedCapSlowerCases}).
   **In stock PyTorch DDP:** the contiguous optimum, passed as per-bucket caps
   (`bucket_cap_mb_list`), was rebuilt exactly as planned in {StockDdpMatchCases} of
   {StockDdpCases} cases and measured {StockDdpListVsDefaultMin}-{StockDdpListVsDefaultMax}x as
   fast as DDP's default (at least {StockDdpAimPct} % faster, interval above 1, in
   {StockDdpListAimCases} cases) and {StockDdpListVsTunedMin}-{StockDdpListVsTunedMax}x as fast
   as DDP at its best measured uniform cap (not slower within the intervals in
   {StockDdpListNotSlowerTunedCommCases} of {StockDdpCommCases} communication-bound cases,
   faster in {StockDdpListFasterTunedCases}); `best` through the executor measured
   {StockDdpBestVsListMin}-{StockDdpBestVsListMax}x the list's speed.
6. **Architectures, for real.** On the emulated cluster, hierarchical all-reduce took
   {ArchHierFlatOneZeroZerombitMeas} (predicted {ArchHierFlatOneZeroZerombitPred}) of the flat
   ring's time at 100 Mbit/s between nodes, below 1 in {ArchHierFlatOneZeroZerombitRoundsBelowOne}
   of {ArchHierFlatOneZeroZerombitRounds} rounds with p10-p90 ranges apart in all but
   {ArchHierFlatOneZeroZerombitRoundsOverlap}; at 1 Gbit/s it took {ArchHierFlatOnegbitMeas}
   (predicted {ArchHierFlatOnegbitPred}), but below 1 in only
   {ArchHierFlatOnegbitRoundsBelowOne} of {ArchHierFlatOnegbitRounds} rounds and with
   overlapping p10-p90 ranges in {ArchHierFlatOnegbitRoundsOverlap}: there the measurement does
   not order the two. One parameter server with two workers took {ArchPsFlatOnegbitMeas}
   (predicted {ArchPsFlatOnegbitPred}) and {ArchPsFlatOneZeroZerombitMeas} (predicted
   {ArchPsFlatOneZeroZerombitPred}) of the flat all-reduce at 1 Gbit/s and 100 Mbit/s
   (ranges apart in all rounds but {ArchPsFlatOnegbitRoundsOverlap} and
   {ArchPsFlatOneZeroZerombitRoundsOverlap}; below 1 in {ArchPsFlatOnegbitRoundsBelowOne} and
   {ArchPsFlatOneZeroZerombitRoundsBelowOne}); the absolute times miss by {ArchErrMin} to
   {ArchErrMax} %.
7. **GPU generations.** Under the same rule (a case counts where DDP's and the best plan's
   rows both pass), PyTorch DDP's default plan leaves a median
   {GenVOneZeroZeroDdpExposedMedianPct} % of the iteration as exposed communication on
   {GenVOneZeroZeroNumQuoted} of {GenVOneZeroZeroNumCases} V100 cases,
   {GenAOneZeroZeroGhTwoZeroZeroDdpExposedMedianPct} % on {GenAOneZeroZeroGhTwoZeroZeroNumQuoted}
   of {GenAOneZeroZeroGhTwoZeroZeroNumCases} A100/GH200 cases and
   {GenHTwoZeroZeroDdpExposedMedianPct} % (up to {GenHTwoZeroZeroDdpExposedMaxPct} %) on
   {GenHTwoZeroZeroNumQuoted} H200 cases with our own H200 compute on the Hopper sweeps
   (AWS p5 H100, Alps GH200; same GPU generation, other cluster); the best plan found gains
   a median {GenVOneZeroZeroBestGainMedianPct} % (V100),
   {GenAOneZeroZeroGhTwoZeroZeroBestGainMedianPct} % (A100/GH200) and
   {GenHTwoZeroZeroBestGainMedianPct} % (H200, up to {GenHTwoZeroZeroBestGainMaxPct} %) over
   DDP's default. On the real K80 cluster {GenKEightZeroNumQuoted} of its
   {GenKEightZeroNumCases} cases pass the rule (DDP's buckets are larger than any blob its
   trace timed), so no K80 median is quoted ({GenKEightZeroDdpExposedMedianPct}). Left out as
   mostly priced outside the measured sizes (above the largest, for merged buckets):
   {GenVOneZeroZeroNumOutsideDomain} V100, {GenAOneZeroZeroGhTwoZeroZeroNumOutsideDomain}
   A100/GH200 and {GenHTwoZeroZeroNumOutsideDomain} H200 cases (columns
   `comm_below_range_pct`, `comm_above_range_pct`); as host-bound, the
   {GenHTwoZeroZeroNumHostBound} H200 cases of host-bound models (a GPU busy share of the
   profiled step below {HostCheckHostBoundShare}, the importer's rule): their compute is
   set by the host's kernel-launch rate and moved by up to 40 %
   between two H200 machines, so one compute time does not describe them; they stay in the
   table, marked. The H200 captures' per-layer hooks slowed host-bound models by up to
   {CaptureHookOverheadMaxPct} % ({CaptureHookOverheadMaxTrace}), so those rows overstate
   compute.
8. **Sharded data parallelism, for real.** Over {ShardedMeasuredCases} CPU cases (two gloo
   ranks, loopback and 1 Gbit/s), stock FSDP2 formed the planned units in
   {ShardedUnitsMatchPlans} of {ShardedMeasuredPlans} plan runs. FSDP2's default units with
   resharding turned off (`reshard_after_forward=False`, one flag) measured
   {ShardedNoReshardVsDefaultMin}-{ShardedNoReshardVsDefaultMax}x as fast as FSDP2's defaults
   (faster, interval above 1, in {ShardedNoReshardVsDefaultFasterCases} of
   {ShardedNoReshardVsDefaultCases} cases, slower in {ShardedNoReshardVsDefaultSlowerCases})
   at {ShardedNoReshardPredPeakOverDefaultMin}-{ShardedNoReshardPredPeakOverDefaultMax}x
   their predicted peak of gathered parameters and gradients
   ({ShardedNoReshardMeasPeakOverDefaultMin}-{ShardedNoReshardMeasPeakOverDefaultMax}x the
   measured peak of memory allocated in an iteration). The optimum of unit grouping,
   resharding and prefetch without a memory cap measured
   {ShardedOptVsNoReshardMin}-{ShardedOptVsNoReshardMax}x as fast as that one-flag baseline
   (faster in {ShardedOptVsNoReshardFasterCases} of {ShardedOptVsNoReshardCases} cases,
   slower in {ShardedOptVsNoReshardSlowerCases}) and
   {ShardedOptVsDefaultMin}-{ShardedOptVsDefaultMax}x as fast as FSDP2's defaults (faster in
   {ShardedOptVsDefaultFasterCases}, slower in {ShardedOptVsDefaultSlowerCases}), needing
   {ShardedOptPredPeakOverDefaultMin}-{ShardedOptPredPeakOverDefaultMax}x their predicted
   peak ({ShardedOptMeasPeakOverDefaultMin}-{ShardedOptMeasPeakOverDefaultMax}x measured);
   capped at FSDP2's default predicted peak, the optimum measured
   {ShardedCappedVsDefaultMin}-{ShardedCappedVsDefaultMax}x as fast as FSDP2's defaults
   (faster in {ShardedCappedVsDefaultFasterCases} of {ShardedCappedVsDefaultCases} cases,
   slower in {ShardedCappedVsDefaultSlowerCases}) at
   {ShardedCappedMeasPeakOverDefaultMin}-{ShardedCappedMeasPeakOverDefaultMax}x their
   measured peak. The blocking replay on the compute trace scaled to the compute-only
   control of the same launch had a median |error| of {ShardedMedianAbsErrPct} % (largest
   {ShardedMaxAbsErrPct} %; unscaled {ShardedMedianAbsErrRawPct} % and
   {ShardedMaxAbsErrRawPct} %), uncorrected for interference.
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
    write_text_atomic(out, render_claims(parse_macros(read_text(path, universal_newlines=True))))
