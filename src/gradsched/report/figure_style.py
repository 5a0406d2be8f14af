"""What every figure shares: the print sizes, the colours and line styles of series and
algorithms, the style, panel grids and legends, and the deterministic PDF/PNG writer with
its "no data" placeholder (the figures themselves are in the study modules)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from gradsched.io import atomic_open
from gradsched.report.algorithms import ALGORITHM_ORDER

PNG_DPI = 150
TEXT_WIDTH_IN = 6.69
"""The paper's \\textwidth in inches: US letter (8.5 in) less two 2.3 cm margins
(``\\usepackage[margin=2.3cm]{geometry}`` in paper/main.tex). A figure drawn this wide and
included at ``width=\\textwidth`` prints its text at the size it was drawn."""
FONT_PT = 8.0
"""Axis labels, titles and legends at print size; tick labels one point smaller. Each
figure is drawn at the width it is included at, so these are the printed sizes."""
QUALITATIVE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000",
               "#882255", "#332288", "#999933", "#44AA99", "#F0E442")
"""Distinct colours for series: Okabe & Ito's colour-blind safe set (Nature Methods 8, 441,
2011), then Tol's wine, indigo, olive and teal (SRON/EPS/TN/09-002, "muted")."""
LINESTYLES = ("-", "--", "-.", ":")
MARKER_CYCLE = ("o", "s", "^", "D", "v", "P", "X", "h")


def width_in(fraction: float = 1.0) -> float:
    """Figure width in inches for ``\\includegraphics[width=<fraction>\\textwidth]``."""
    return TEXT_WIDTH_IN * fraction


def series_style(i: int) -> dict[str, object]:
    """Colour, line style and marker of the ``i``-th series: a new colour for each of the
    first :data:`QUALITATIVE` series, then the colours again with another line style and
    marker, so that no two series of a figure look alike."""
    n = len(QUALITATIVE)
    return {"color": QUALITATIVE[i % n], "ls": LINESTYLES[(i // n) % len(LINESTYLES)],
            "marker": MARKER_CYCLE[(i + i // n) % len(MARKER_CYCLE)]}


class PlainLogFormatter(matplotlib.ticker.LogFormatter):
    """Log-axis tick labels as plain numbers with a unit prefix (``100``, ``10k``, ``1M``;
    base 2: ``128``, ``8Ki``, ``32Mi``) instead of ``10^3``, whose exponent would print at
    70 % of the tick size, under 6 pt. Which ticks get a label is matplotlib's choice."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return plain_number(x, binary=self._base == 2)


def plain_number(x: float, binary: bool = False) -> str:
    """``x`` with a decimal (k, M, G) or binary (Ki, Mi, Gi) prefix, 3 significant digits."""
    step, prefixes = (1024.0, ("", "Ki", "Mi", "Gi", "Ti")) if binary else \
        (1000.0, ("", "k", "M", "G", "T"))
    i = 0
    while abs(x) >= step and i < len(prefixes) - 1:
        x, i = x / step, i + 1
    return f"{x:.3g}{prefixes[i]}"


def plain_log_ticks(ax: plt.Axes) -> None:
    """:class:`PlainLogFormatter` on every log-scaled axis of ``ax``."""
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            base = axis.get_transform().base
            axis.set_major_formatter(PlainLogFormatter(base=base))
            axis.set_minor_formatter(PlainLogFormatter(base=base, labelOnlyBase=False))


def setup_style() -> None:
    """The one style every figure uses: seaborn's white grid, text at :data:`FONT_PT`."""
    sns.set_theme(context="paper", style="whitegrid")
    small = FONT_PT - 1
    plt.rcParams.update({"pdf.fonttype": 42, "ps.fonttype": 42, "svg.hashsalt": "gradsched",
                         "figure.dpi": 100, "savefig.bbox": "tight", "savefig.pad_inches": 0.02,
                         "font.size": FONT_PT, "axes.titlesize": FONT_PT,
                         "axes.labelsize": FONT_PT, "legend.fontsize": small,
                         "legend.title_fontsize": small, "xtick.labelsize": small,
                         "ytick.labelsize": small, "figure.titlesize": FONT_PT + 1})


def algorithm_colors(names: Sequence[str] = ALGORITHM_ORDER) -> dict[str, tuple]:
    """One colour per algorithm: tab10 in :data:`ALGORITHM_ORDER`, then gold for the
    eleventh (``best``; tab10 would repeat the first colour, SyncSGD's); names outside that
    order get colours far from those of the algorithms in ``names`` (:func:`other_colors`)."""
    palette = [*sns.color_palette("tab10", 10), (0.98, 0.78, 0.0)]
    out = {name: palette[i % len(palette)] for i, name in enumerate(ALGORITHM_ORDER)}
    extra = [n for n in names if n not in out]
    taken = [out[n] for n in names if n in out]
    return {**out, **dict(zip(extra, other_colors(len(extra), taken), strict=True))}


OTHER_POOL = ("#000000", "#882255", "#332288", "#44AA99", "#999933", "#88CCEE", "#117733",
              "#AA4499", "#DDCC77", "#661100", "#6699CC", "#AA4466")
"""Candidates of :func:`other_colors`: black and Tol's muted and light qualitative sets."""


def other_colors(n: int, taken: Sequence[tuple], min_distance: float = 0.25) -> list[tuple]:
    """``n`` colours from :data:`OTHER_POOL` at least ``min_distance`` (RGB, 0-1 per channel)
    from every colour in ``taken`` and from each other where the pool allows; the rest of
    the pool (in order) when it does not."""
    pool = [matplotlib.colors.to_rgb(c) for c in OTHER_POOL]
    chosen: list[tuple] = []
    for color in pool:
        if all(np.linalg.norm(np.subtract(color, t)) >= min_distance
               for t in [*taken, *chosen]):
            chosen.append(color)
    chosen += [c for c in pool if c not in chosen]
    return [chosen[i % len(chosen)] for i in range(n)]


def save(fig: plt.Figure, out_pdf: str | Path, out_png: str | Path) -> None:
    """Write ``fig`` as PDF (no creation date: deterministic) and PNG, atomically."""
    with atomic_open(out_pdf, "wb") as handle:
        fig.savefig(handle, format="pdf", metadata={"CreationDate": None, "ModDate": None})
    with atomic_open(out_png, "wb") as handle:
        fig.savefig(handle, format="png", dpi=PNG_DPI, metadata={"Software": None})
    plt.close(fig)


def placeholder(out_pdf: str | Path, out_png: str | Path, title: str, message: str) -> None:
    """A figure that states that its data is missing (never a made-up plot)."""
    setup_style()
    fig, ax = plt.subplots(figsize=(width_in(0.6), 1.5))
    ax.axis("off")
    ax.text(0.5, 0.62, title, ha="center", va="center", fontsize=FONT_PT + 1, weight="bold",
            wrap=True)
    ax.text(0.5, 0.32, "NO DATA: " + message, ha="center", va="center", fontsize=FONT_PT,
            wrap=True)
    save(fig, out_pdf, out_png)


def panel_grid(n: int, ncols: int, width: float = TEXT_WIDTH_IN, height: float = 2.0
          ) -> tuple[plt.Figure, list[plt.Axes]]:
    """``n`` panels in rows of ``ncols``: ``width`` is the whole figure's (the width it is
    included at), ``height`` each row's; constrained layout, so that a legend placed
    ``outside`` the axes gets its own room."""
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height * nrows), squeeze=False,
                             layout="constrained")
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


PAIRING_TITLES = {
    "real": "real system",
    "matched-gpu": "matched GPU type, other cluster",
    "matched-generation": "same GPU generation, other cluster",
    "what-if": "WHAT-IF: unrelated systems",
}
"""How a panel title names a case's pairing (:data:`gradsched.report.collect.PAIRINGS`)."""


def pairing_of(part: pd.DataFrame) -> str:
    """The panel's pairing label ("" for results collected without one)."""
    if "pairing" not in part or part["pairing"].isna().all():
        return ""
    value = str(part["pairing"].dropna().iloc[0])
    return PAIRING_TITLES.get(value, value)


def legend_union(axes: Sequence[plt.Axes]) -> tuple[list, list[str]]:
    """Every label of every panel once, in the order first drawn."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    return list(seen.values()), list(seen)
