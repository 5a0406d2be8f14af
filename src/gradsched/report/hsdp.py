"""The mesh table: full sharding, full sharding resharded to a node after forward, and HSDP,
per model and world size, from the frame of
:func:`gradsched.experiments.sharded.mesh.compare_meshes` rows (``gradsched shard mesh``).

Per (model, network, world size): each kind's exposed communication (iteration time less
compute, seconds) and memory per GPU (GiB), the HSDP mesh (shard group, resharded to a node
or not) that is fastest among
those that fit, and the fastest mesh that fits (``advise --sharded --mesh`` recommends it
only beyond the comm model's error margin). Macros carry the numbers the prose quotes
(letters-only names, :mod:`gradsched.report.latex`). Formatting only.
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.latex import number

GIB = 2.0**30
COLUMNS = ("model", "network", "GPUs", "FSDP exposed [s]", "FSDP [GiB]",
           "reshard-to-node exposed [s]", "reshard-to-node [GiB]", "HSDP mesh",
           "HSDP exposed [s]", "HSDP [GiB]",
           "smallest HSDP shard that fits", "fastest that fits", "iteration [s]")
MESH_TABLE_ALIGN = "llrp{1.2cm}p{1cm}p{2.1cm}p{2.1cm}lrrp{1.1cm}lr"
"""Paragraph columns where a cell may say "(does not fit)", names on one line: the
table fits a sideways page at 7 pt (``\\gsfit``), one line a row where all fits."""
WORDS = {1: "One", 2: "Two", 4: "Four", 8: "Eight", 16: "Sixteen", 32: "ThirtyTwo",
         64: "SixtyFour", 128: "OneTwentyEight", 256: "TwoFiftySix", 512: "FiveTwelve",
         1024: "TenTwentyFour"}
MODEL_WORDS = {"llama-3.1-8b": "LlamaEight", "llama-3.1-70b": "LlamaSeventy",
               "llama-3.1-405b": "LlamaFourOFive"}


def _cell(frame: pd.DataFrame, name: str, column: str, digits: int = 3) -> str:
    row = frame[frame["candidate"] == name]
    if row.empty:
        return "--"
    value = float(row[column].iloc[0])
    text = number(value / GIB, 1) if column == "memory_bytes" else number(value, digits)
    return text if bool(row["fits"].iloc[0]) else f"{text} (does not fit)"


def _best_hsdp(group: pd.DataFrame) -> pd.Series | None:
    hsdp = group[group["candidate"].str.startswith("hsdp-") & group["fits"]]
    if hsdp.empty:
        return None
    return hsdp.sort_values(["iteration_s", "shard"]).iloc[0]


def mesh_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, world size), strings (module docstring)."""
    rows = []
    for (model, network, world), group in frame.groupby(["model", "network", "world_size"],
                                                        sort=False):
        best = _best_hsdp(group)
        fits = group[group["candidate"].str.startswith("hsdp-") & group["fits"]]
        rec = group[group["fastest"]]
        rows.append({
            "model": model, "network": network, "GPUs": str(world),
            "FSDP exposed [s]": _cell(group, "fsdp", "exposed_comm_s"),
            "FSDP [GiB]": _cell(group, "fsdp", "memory_bytes"),
            "reshard-to-node exposed [s]": _cell(group, "fsdp-reshard-node", "exposed_comm_s"),
            "reshard-to-node [GiB]": _cell(group, "fsdp-reshard-node", "memory_bytes"),
            "HSDP mesh": "--" if best is None else str(best["candidate"]),
            "HSDP exposed [s]": "--" if best is None else number(best["exposed_comm_s"], 3),
            "HSDP [GiB]": "--" if best is None else number(best["memory_bytes"] / GIB, 1),
            "smallest HSDP shard that fits": "--" if fits.empty
            else str(int(fits["shard"].min())),
            "fastest that fits": "none fits" if rec.empty else str(rec["candidate"].iloc[0]),
            "iteration [s]": "--" if rec.empty else number(rec["iteration_s"].iloc[0], 3)})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def mesh_macros(frame: pd.DataFrame) -> dict[str, str]:
    """Macros ``Hsdp<Model><NICs>Nic<GPUs><What>`` for the models, NICs per node and world
    sizes that have words:
    exposed communication of FSDP and of the fastest mesh that fits (s), its name, its
    gain over FSDP (%), and the smallest HSDP shard group that fits."""
    out: dict[str, str] = {}
    for (model, nics, world), group in frame.groupby(["model", "nics_per_node", "world_size"],
                                                     sort=False):
        if model not in MODEL_WORDS or int(world) not in WORDS or int(nics) not in WORDS:
            continue
        key = f"Hsdp{MODEL_WORDS[model]}{WORDS[int(nics)]}Nic{WORDS[int(world)]}"
        fsdp = group[group["candidate"] == "fsdp"].iloc[0]
        rec = group[group["fastest"]]
        out[f"{key}FsdpExposed"] = number(fsdp["exposed_comm_s"], 3)
        fits = group[group["candidate"].str.startswith("hsdp-") & group["fits"]]
        out[f"{key}SmallestShard"] = "--" if fits.empty else str(int(fits["shard"].min()))
        if not rec.empty:
            best = rec.iloc[0]
            out[f"{key}Fastest"] = str(best["candidate"])
            out[f"{key}FastestExposed"] = number(best["exposed_comm_s"], 3)
            out[f"{key}GainPct"] = number(
                100.0 * (fsdp["iteration_s"] / best["iteration_s"] - 1.0), 2)
    return out


MACRO_WHATS = ("FsdpExposed", "SmallestShard", "Fastest", "FastestExposed", "GainPct")


def macro_names(models: tuple[str, ...] = ("llama-3.1-8b", "llama-3.1-70b"),
                nics: tuple[int, ...] = (1, 8),
                worlds: tuple[int, ...] = (64, 128, 256, 512)) -> set[str]:
    """Every name :func:`mesh_macros` writes for workflow/rules/hsdp.smk's grid (the paper
    test's list of generated macros)."""
    return {f"Hsdp{MODEL_WORDS[m]}{WORDS[n]}Nic{WORDS[w]}{what}" for m in models
            for n in nics for w in worlds for what in MACRO_WHATS}
