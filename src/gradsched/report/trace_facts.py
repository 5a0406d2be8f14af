r"""Facts of committed traces that the paper's prose quotes, as macros.

The re-execution section describes its cases by their gradient bytes, the time those bytes
take on the emulated link and the iteration's compute (paper/sections/reexec.tex, "An
experiment that can rank plans"); the GPU and architecture sections quote a trace's tensor
count and its largest tensor (paper/sections/gpu.tex, architectures.tex). Each value is
computed here from the trace file and its sidecar, never typed.

Names: ``Trace<Stem><Fact>`` with ``<Stem>`` the trace file name without ``.csv`` in
:func:`~gradsched.report.latex.camel` form, e.g.
``TraceResnetFiveZeroBTwoCpuFpThreeTwoGradMB``.
"""

from __future__ import annotations

from gradsched.report.latex import NA, camel, number
from gradsched.traces.bundle import CommTrace, ComputeTrace

PROSE_TRACES = ("resnet50-b2-cpu-fp32", "mobilenet_v2-b8-cpu-fp32", "resnet18-b4-cpu-fp32",
                "resnet50-a100-ddp2-b32", "gpt-neo-2.7b-a100-40-mb1-tp1")
"""The compute traces the prose describes: the three CPU traces of the re-execution's cases
(paper/data/reexec/measured.csv, column ``case``), the A100 Kineto ResNet-50 and Sailor's
A100 GPT-Neo-2.7B profile (the GPU section's cases)."""

PROSE_LINKS = ("tbf1gbit", "tbf100mbit")
"""The emulated links (:data:`gradsched.networks.NETWORKS`) whose line rate the wire times
use; each rate is read from a committed sweep's sidecar (``line_rate_Bps``), never typed."""

MB = 1e6
MIB = 2 ** 20


def link_rates(sweeps: list[CommTrace]) -> dict[str, float]:
    """Network key (``tbf`` + the sweep's ``tc`` rate) -> line rate in bytes/s, from each
    sweep sidecar's ``line_rate_Bps`` and ``settings.cluster_rate`` (written by
    ``gradsched capture comm`` on the emulated cluster)."""
    rates: dict[str, float] = {}
    for sweep in sweeps:
        rate = sweep.meta.get("line_rate_Bps")
        cluster = (sweep.meta.get("settings") or {}).get("cluster_rate")
        if rate is not None and cluster:
            rates[f"tbf{cluster}"] = float(rate)
    return rates


def trace_fact_macros(traces: list[ComputeTrace], sweeps: list[CommTrace] | None = None,
                      stems: tuple[str, ...] = PROSE_TRACES,
                      links: tuple[str, ...] = PROSE_LINKS) -> dict[str, str]:
    """For every stem in ``stems`` (``n/a`` where its trace is not given):

    * ``Tensors``: rows of the trace (one per gradient tensor);
    * ``GradMB``: the sum of the ``bytes`` column in decimal MB (10^6 bytes), no decimals;
    * ``LargestTensorMiB``: the largest ``bytes`` in MiB, no decimals;
    * ``IterationS``: the sidecar's ``iteration_nohooks_s`` (the same run's iteration
      without the capture hooks), one decimal, where the capture recorded it;
    * ``Wire<Link>S``: ``GradMB`` bytes over the link's line rate (:func:`link_rates`), one
      decimal -- what one ring all-reduce on two ranks, which sends every byte once per
      link (2(P-1)/P = 1), needs at least.
    """
    by_stem = {trace.stem: trace for trace in traces}
    rates = link_rates(sweeps or [])
    out: dict[str, str] = {}
    for stem in stems:
        key = f"Trace{camel(stem)}"
        trace = by_stem.get(stem)
        total = None if trace is None else trace.total_bytes
        out[f"{key}Tensors"] = NA if trace is None else str(trace.n_tensors)
        out[f"{key}GradMB"] = NA if total is None else number(total / MB, 0)
        out[f"{key}LargestTensorMiB"] = NA if trace is None else number(
            float(trace.frame["bytes"].max()) / MIB, 0)
        iteration = None if trace is None else trace.meta.get("iteration_nohooks_s")
        out[f"{key}IterationS"] = NA if iteration is None else number(float(iteration), 1)
        for link in links:
            rate = rates.get(link)
            out[f"{key}Wire{camel(link)}S"] = (NA if total is None or rate is None
                                               else number(total / rate, 1))
    return out
