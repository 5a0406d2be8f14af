"""Fit the free inputs of :mod:`.tuning` to the smallest measured scale.

Free, per level (between nodes from the smallest multi-node sweep; inside a node from an
intra-node sweep when one is given):

* the bus bandwidth of the level (bytes/s), bounded by the level's line rate (the node's
  NICs together between nodes, a GPU's NVLink or PCIe rate inside);
* one latency offset added to NCCL's ``baseLat`` of every protocol (seconds): what a launch
  costs before any hop beyond NCCL's own figure (kernel launch, proxy progress and host
  synchronisation, which nccl-tests' timing includes), the same whatever the protocol;
* how far LL and LL128 reach NCCL's efficiency factors (two numbers > 0, bounded above by
  what the protocols' wire formats allow, :func:`efficiency_bounds`: LL up to 1.5, LL128
  just above 1 under 2.8.4): the LL protocol's flag-per-8-bytes and LL128's per-line
  overheads depend on the GPU and the NCCL build; Simple's bandwidth is the level's bus
  bandwidth itself;
* how much faster than its share one channel runs when NCCL runs a small collective on few
  of its channels (:func:`.tuning.channel_fraction`; between 1, channels independent, and
  32, one channel as fast as all), what the channels share of the node's NICs and PCIe.

One switch of the machine, between nodes: whether LL128 runs there
(:attr:`.hardware.Hardware.net_ll128`), kept as the better of the two fits of the multi-node
sweep (:func:`calibrate`).

Everything else (steps, hops x per-hop latency from ``hwLatencies``, protocol efficiencies,
tree/ring bandwidth ratios, the algorithm/protocol choice, the fabric slowdown of
:mod:`.fabric`) comes from the structure, so the other node counts are predictions.

The fit minimises the squared relative error ``sum((T_model / T_measured - 1)^2)`` over the
sweep's sizes (times span five decades). The model is a minimum over (algorithm, protocol)
pairs, so the objective is piecewise smooth: :func:`fit_level` runs a bounded least squares
in log-parameters from several starts (the bandwidth read off the largest size and each
protocol's latency off the smallest) and keeps the best.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from gradsched.costmodel.formulas import FITTED_DIGITS
from gradsched.costmodel.nccl.constants import constants_for
from gradsched.costmodel.nccl.hardware import Hardware
from gradsched.costmodel.nccl.tuning import (
    WIRE_BYTES_PER_DATA_BYTE,
    LevelParams,
    Params,
    layout,
    nccl_default_params,
    select,
)
from gradsched.errors import ConfigError
from gradsched.io import round_significant

MAX_OFFSET_US = 1000.0
"""Largest latency offset over NCCL's base latency the fit may take (us)."""
_US = 1e-6
EFFICIENCY_BOUNDS = ((0.05, 1.0), (0.05, 1.0))
"""Floors of the LL and LL128 efficiencies and their starting ceilings (1 = NCCL's own
factors); the ceilings the fit uses are :func:`efficiency_bounds`'."""


@dataclass(frozen=True)
class Sweep:
    """One measured series: ``collective`` at ``world_size`` ranks on ``nodes`` nodes."""

    collective: str
    world_size: int
    nodes: int
    nbytes: np.ndarray
    times_s: np.ndarray


def _level_of(params: Params, multi_node: bool, level: LevelParams) -> Params:
    return replace(params, inter=level) if multi_node else replace(params, intra=level)


def fit_level(hw: Hardware, params: Params, sweep: Sweep) -> tuple[LevelParams, float]:
    """The level ``sweep`` exercises (between nodes if it spans several), fitted; and the
    sweep's MAPE (percent) under it."""
    n_ranks, n_nodes = layout(sweep.world_size, hw.gpus_per_node)
    if n_ranks < 2:
        raise ConfigError(f"a sweep of {n_ranks} rank has no collective to fit")
    multi = n_nodes > 1
    line = hw.node_nic_Bps if multi else hw.intra_Bps
    m, t = np.asarray(sweep.nbytes, float), np.asarray(sweep.times_s, float)
    share = 2.0 * (n_ranks - 1) / n_ranks if sweep.collective == "all_reduce" else \
        (n_ranks - 1) / n_ranks if sweep.collective in ("reduce_scatter", "all_gather") else 1.0
    bw0 = min(float(np.max(share * m / t)), 0.9 * line)
    nccl_base = constants_for(hw.nccl_version).base_latency_us["ring"]

    # x = (log busbw, latency offset in us, log LL efficiency, log LL128 efficiency, log
    # channel speedup); the
    # offset may be negative down to minus NCCL's smallest base latency (base latency >= 0)
    def build(x: np.ndarray) -> LevelParams:
        base = tuple(max(float(v + x[1]), 0.0) * _US for v in nccl_base)
        return LevelParams(float(np.exp(x[0])), base,  # type: ignore[arg-type]
                           (float(np.exp(x[2])), float(np.exp(x[3]))), float(np.exp(x[4])))

    def resid(x: np.ndarray) -> np.ndarray:
        trial = _level_of(params, multi, build(x))
        return select(hw, trial, sweep.collective, m, sweep.world_size)[0] / t - 1.0

    (ll_lo, ll_hi), (l128_lo, l128_hi) = efficiency_bounds(hw)
    lo = np.array([np.log(1e6), -min(nccl_base), np.log(ll_lo), np.log(l128_lo), 0.0])
    hi = np.array([np.log(line), MAX_OFFSET_US, np.log(ll_hi), np.log(l128_hi), np.log(32.0)])
    t_min_us = float(np.min(t)) / _US
    best = None
    for bw_scale in (1.0, 2.0):
        for lat_scale in (0.0, 0.25, 0.5):
            x0 = np.array([np.log(min(bw0 * bw_scale, line * 0.999)), t_min_us * lat_scale,
                           np.log(0.9 * ll_hi + 0.1 * ll_lo),
                           np.log(0.9 * l128_hi + 0.1 * l128_lo), np.log(2.0)])
            sol = least_squares(resid, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi),
                                method="trf", x_scale=np.array([1.0, 10.0, 1.0, 1.0, 1.0]),
                                diff_step=1e-3)
            if best is None or sol.cost < best.cost:
                best = sol
    assert best is not None
    level = _rounded(build(best.x))
    trial = _level_of(params, multi, level)
    mape = float(100.0 * np.mean(np.abs(select(hw, trial, sweep.collective, m,
                                                   sweep.world_size)[0] / t - 1.0)))
    return level, mape


def _rounded(level: LevelParams) -> LevelParams:
    """``level`` to :data:`~gradsched.costmodel.formulas.FITTED_DIGITS` significant digits:
    the solver pins its parameters no closer than that, and numpy's SIMD paths (AVX-512,
    AVX2) end it a few ulps apart; unrounded, that noise can flip NCCL's protocol choice
    (a comparison of two times) and so the printed errors from one CPU to another."""
    return LevelParams(float(round_significant(level.busbw_Bps, FITTED_DIGITS)),
                       tuple(float(round_significant(v, FITTED_DIGITS))
                             for v in level.base_latency_s),  # type: ignore[arg-type]
                       tuple(float(round_significant(v, FITTED_DIGITS))
                             for v in level.protocol_efficiency),  # type: ignore[arg-type]
                       float(round_significant(level.channel_speedup, FITTED_DIGITS)))


def calibrate(hw: Hardware, inter: Sweep | None, intra: Sweep | None, fabric_k: float
              ) -> tuple[Hardware, Params, dict[str, float]]:
    """The machine and params fitted on the multi-node sweep ``inter`` and the single-node
    sweep ``intra`` (either may be missing: that level then keeps the other's efficiency and
    latencies, :func:`transfer_level`); and each fitted sweep's MAPE (percent) keyed
    ``inter``/``intra``.

    Whether LL128 runs between nodes (:attr:`.hardware.Hardware.net_ll128`: NCCL enables it
    only where the GPU-NIC path is PCIe-switch close, tuning.cc L192-195 at v2.8.4-1, which
    no nccl-tests log reports) is decided on the fitted multi-node sweep alone: the level is
    fitted with and without it and the smaller residual on that sweep is kept. Without
    LL128 NCCL chooses among ring/tree LL and Simple only, which moves every switch
    between protocols (the V100 2-node sweep: a jump from 92 to 150 us between 256 and 512
    KiB where NCCL's own estimate switches from ring LL to ring Simple)."""
    if inter is None and intra is None:
        raise ConfigError("nothing to calibrate on: no sweep")
    options = [hw]
    if inter is not None and hw.ll128:
        options = [replace(hw, net_ll128=True), replace(hw, net_ll128=False)]
    best: tuple[Hardware, Params, dict[str, float]] | None = None
    for cand in options:
        fitted = _calibrate_on(cand, inter, intra, fabric_k)
        if best is None or fitted[2].get("inter", 0.0) < best[2].get("inter", 0.0):
            best = (cand, *fitted[1:])  # type: ignore[assignment]
    assert best is not None
    return best


def _calibrate_on(hw: Hardware, inter: Sweep | None, intra: Sweep | None, fabric_k: float
                  ) -> tuple[Hardware, Params, dict[str, float]]:
    params = nccl_default_params(hw)
    ref_nodes = 2
    if inter is not None:
        ref_nodes = layout(inter.world_size, hw.gpus_per_node)[1]
    params = replace(params, fabric_per_doubling=fabric_k, fabric_ref_nodes=ref_nodes,
                     fabric_free_nodes=hw.full_bisection_nodes)
    errors: dict[str, float] = {}
    if intra is not None:
        level, errors["intra"] = fit_level(hw, params, intra)
        params = replace(params, intra=level)
    if inter is not None:
        level, errors["inter"] = fit_level(hw, params, inter)
        params = replace(params, inter=level)
    if intra is None:
        params = replace(params, intra=transfer_level(params.inter, hw.node_nic_Bps,
                                                       hw.intra_Bps))
    if inter is None:
        params = replace(params, inter=transfer_level(params.intra, hw.intra_Bps,
                                                       hw.node_nic_Bps))
    return hw, params, errors


def transfer_level(level: LevelParams, from_line_Bps: float, to_line_Bps: float
                   ) -> LevelParams:
    """A level not measured: the same fraction of its line rate and the same base latencies
    as the measured one (a derivation, recorded as such in the model's metadata)."""
    return LevelParams(level.busbw_Bps * to_line_Bps / from_line_Bps, level.base_latency_s)


def efficiency_bounds(hw: Hardware) -> tuple[tuple[float, float], tuple[float, float]]:
    """Bounds of the LL and LL128 efficiencies on ``hw``: from :data:`EFFICIENCY_BOUNDS`'
    floor up to what the protocols' wire formats allow. A protocol cannot move data faster
    than the link carries its wire bytes: an LL line is 16 bytes with 8 of data, an LL128
    line 128 bytes with 120 of data (2.8.4 ``src/include/devcomm.h`` L33-41 and L66-67,
    :data:`.tuning.WIRE_BYTES_PER_DATA_BYTE`), so LL reaches at most half the level's bus
    bandwidth and LL128 15/16 of it. NCCL 2.8.4's estimate puts LL at ``1/4`` of the bus
    bandwidth (ring, all-reduce or between nodes, tuning.cc L125), ``1/3`` (ring, other
    collectives on one node, L125) or ``0.92/3.8`` (tree, L127-128) and LL128 at ``0.92``
    (ring, L126): the efficiency, shared by every use of the level, may rise until the
    largest of these reaches the wire bound (LL 1.5, LL128 about 1.02)."""
    k = constants_for(hw.nccl_version)
    wire = WIRE_BYTES_PER_DATA_BYTE
    ll_factor = max(k.ring_ll_factor, k.ring_ll_factor_other, 0.92 / 3.8)
    ll128_factor = max(0.92, 0.92 * k.tree_ll128_factor_multi)
    (ll_lo, _), (l128_lo, _) = EFFICIENCY_BOUNDS
    return ((ll_lo, 1.0 / wire["LL"] / ll_factor),
            (l128_lo, 1.0 / wire["LL128"] / ll128_factor))
