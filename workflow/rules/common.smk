# Shared by every stage: config validation, the target lists, and small helpers.
# No measurement or modelling logic lives here: rules call the `gradsched` CLI.

import glob
import shlex
import shutil
import sys
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

validate(config, "../schemas/config.schema.yaml")

# The CLI of the package, run with the interpreter that runs Snakemake (the .venv one).
GS = f"{shlex.quote(sys.executable)} -m gradsched"
RESULTS = "results"
LOGS = "logs"
FIG = "paper/figures"
TAB = "paper/tables"
GEN = "paper/generated"


wildcard_constraints:
    set="main|smoke",
    compute="[A-Za-z0-9][A-Za-z0-9_.-]*",
    network="[A-Za-z0-9][A-Za-z0-9_.-]*",
    stem="[^/]+",
    kind="alpha-beta|piecewise|interp",
    alg="[a-z][a-z0-9_]*",


def _fail(message):
    raise WorkflowError(f"config error: {message}")


def _expand_glob(pattern):
    hits = sorted(glob.glob(pattern, recursive=True))
    return [h for h in hits if h.endswith(".csv")]


# ------------------------------------------------------------------ comm traces
def fit_traces():
    """Every comm trace fitted (config comm_traces globs), as {stem: path}."""
    out = {}
    for pattern in config.get("comm_traces", ["traces/comm/external/*.csv"]):
        for path in _expand_glob(pattern):
            stem = Path(path).stem
            if stem in out and out[stem] != path:
                _fail(
                    f"two comm traces share the file name {stem}: {out[stem]}, {path}"
                )
            out[stem] = path
    return dict(sorted(out.items()))


def network_traces(network):
    """{stem: path} of a network's comm traces (one per world size)."""
    if network not in config["networks"]:
        _fail(
            f"unknown network {network!r}; configured: {', '.join(sorted(config['networks']))}"
        )
    spec = config["networks"][network]
    patterns = [spec] if isinstance(spec, str) else list(spec)
    paths = [p for pat in patterns for p in _expand_glob(pat)]
    if not paths:
        _fail(f"network {network!r}: no comm trace matches {spec!r}")
    return {Path(p).stem: p for p in sorted(paths)}


def comm_path(wildcards):
    return network_traces(wildcards.network)[wildcards.stem]


def compute_path(name):
    if name not in config["compute"]:
        _fail(
            f"unknown compute trace {name!r}; configured: {', '.join(sorted(config['compute']))}"
        )
    return config["compute"][name]


# ------------------------------------------------------------------------ cases
def cases():
    """Configured (compute, network, pairing, family) tuples; all pairs when `cases` is
    empty (then what-if, family "other")."""
    listed = config.get("cases") or [
        {"compute": c, "network": n}
        for c in config["compute"]
        for n in config["networks"]
    ]
    out = []
    for case in listed:
        compute_path(case["compute"])
        network_traces(case["network"])
        out.append(
            (
                case["compute"],
                case["network"],
                case.get("pairing", "what-if"),
                case.get("family", "other"),
            )
        )
    return out


def real_pairs():
    return [(c, n) for c, n, pairing, _ in cases() if pairing == "real"]


def case_families():
    """The compute families of the main set, in config order (one figure each)."""
    return list(dict.fromkeys(family for _, _, _, family in cases()))


def case_labels(set_name):
    """`report collect --label` arguments: each pair's family and pairing."""
    if set_name == "smoke":
        return ""
    return " ".join(
        f"--label {c} {n} {family} {pairing}" for c, n, pairing, family in cases()
    )


def set_cases(set_name):
    """[(compute, network, stem, comm path)] replayed by a result set."""
    if set_name == "smoke":
        pairs = [(config["smoke"]["compute"], config["smoke"]["network"])]
    else:
        pairs = [(c, n) for c, n, _, _ in cases()]
    return [
        (c, n, stem, path) for c, n in pairs for stem, path in network_traces(n).items()
    ]


def set_algorithms(set_name):
    if set_name == "smoke":
        return config["smoke"].get("algorithms", ["syncsgd", "wfbp", "mgwfbp"])
    return config["algorithms"]


def replay_results(set_name):
    return [
        f"{RESULTS}/replay/{set_name}/{c}/{n}/{stem}.csv"
        for c, n, stem, _ in set_cases(set_name)
    ] + [
        extrapolated_result(set_name, c, n, world)
        for c, n, world in extrapolated_cases(set_name)
    ]


# ---------------------------------------------------------------- extrapolation
def _sweep_world(path):
    """The world size of a comm trace CSV (its first data row)."""
    with open(path, encoding="utf-8") as handle:
        rows = [line for line in handle if line.strip() and not line.startswith("#")]
    header = rows[0].strip().split(",")
    return int(rows[1].strip().split(",")[header.index("world_size")])


def extrapolations():
    """{network: item} of config `extrapolate`: world sizes beyond a network's sweeps,
    replayed on its ring-scaled cross-world-size model fitted at `fit_on`."""
    out = {}
    for item in config.get("extrapolate") or []:
        held = {_sweep_world(p): p for p in network_traces(item["network"]).values()}
        missing = [w for w in item["fit_on"] if w not in held]
        if missing:
            _fail(f"extrapolate {item['network']}: fit_on {missing} not among {sorted(held)}")
        inside = [w for w in item["world_sizes"] if w <= max(held)]
        if inside:
            _fail(
                f"extrapolate {item['network']}: world sizes {inside} are within the "
                f"sweeps (largest {max(held)}); replay those from the sweeps"
            )
        out[item["network"]] = dict(item, reference=held[max(held)])
    return out


def extrapolated_cases(set_name):
    """[(compute, network, world size)] replayed beyond the sweeps (main set only)."""
    if set_name == "smoke":
        return []
    ex = extrapolations()
    return [
        (c, n, w) for c, n, _, _ in cases() if n in ex for w in ex[n]["world_sizes"]
    ]


def extrapolated_result(set_name, compute, network, world):
    return f"{RESULTS}/replay/{set_name}/{compute}/{network}/extrapolated/p{world}.csv"


def knob_args(algorithms):
    knobs = config.get("knobs") or {}
    args = []
    for alg in algorithms:
        for name, value in sorted((knobs.get(alg) or {}).items()):
            args.append(f"--knob {shlex.quote(f'{alg}.{name}={value}')}")
    return " ".join(args)


def _check_algorithms():
    try:
        from gradsched.planners import planner_names
    except ImportError as exc:  # the planners are not installed yet
        print(f"warning: cannot check algorithm names ({exc})", file=sys.stderr)
        return
    known = set(planner_names())
    for name in (
        set(config["algorithms"])
        | set(set_algorithms("smoke"))
        | set(config["timeline"].get("algorithms", []))
    ):
        if name not in known:
            _fail(f"unknown algorithm {name!r}; known: {', '.join(sorted(known))}")


_check_algorithms()


# ---------------------------------------------------------------------- fitting
def curve_traces():
    traces = fit_traces()
    wanted = (config.get("fit", {}).get("curves") or {}).get("traces", [])
    missing = [t for t in wanted if t not in traces]
    if missing:
        _fail(f"fit.curves.traces not among comm_traces: {', '.join(missing)}")
    return {t: traces[t] for t in wanted}


def curve_models():
    curves = config.get("fit", {}).get("curves") or {}
    return [
        f"{RESULTS}/fit/models/{stem}.{kind}.json"
        for stem in curve_traces()
        for kind in curves.get("models", ["alpha-beta", "piecewise"])
    ]


def crossws_series():
    out = {}
    for item in config.get("fit", {}).get("cross_world_size") or []:
        network_traces(item["network"])
        out[item["network"]] = item
    return out


# ---------------------------------------------------------------------- compare
def external_dir():
    path = Path(config.get("external_dir", "data/external"))
    return path if path.is_dir() else None


def nccl_pairs():
    """[(external log, committed trace)] of every nccl-tests manifest entry."""
    manifest = Path(config.get("compare", {}).get("manifest", "traces/manifest.yaml"))
    if not manifest.is_file():
        return []
    entries = (yaml.safe_load(manifest.read_text()) or {}).get("files") or []
    return [
        (e["file"], f"traces/{e['out']}")
        for e in entries
        if e.get("importer") == "nccl-tests"
    ]


def bcaffe_checks():
    return {
        Path(item["comm"]).stem: item
        for item in config.get("compare", {}).get("bcaffe") or []
    }


# ----------------------------------------------------------------------- paper
def latex_available():
    return (
        config.get("paper", {}).get("latex", "auto") == "auto"
        and shutil.which("latexmk") is not None
    )


# One replay-vs-world-size figure per compute family (config `cases: family`).
REPLAY_FIGURES = [f"replay-vs-world-size-{family}" for family in case_families()]
FIGURES = ["fit-curves", "fit-mape", *REPLAY_FIGURES, "timeline", "gaps"]
TABLES = [
    "captured-compute",
    "captured-comm",
    "fits",
    "crossws",
    "replay",
    "compare",
    "forward",
]
# The `replay` table holds the families with a real pairing (the evaluation's cases); every
# other family (the matched-GPU cases) gets its own replay-<family> table, so that each fits
# its page. gpu-scaling: the replay against NVIDIA's published DGX scaling (issue 15).
MAIN_REPLAY_FAMILIES = [
    family
    for family in case_families()
    if any(p == "real" and f == family for _, _, p, f in cases())
]
REPLAY_FAMILY_TABLES = [
    f"replay-{family}"
    for family in case_families()
    if family not in MAIN_REPLAY_FAMILIES
]
TABLES += REPLAY_FAMILY_TABLES + ["gpu-scaling"]
SCALING_SPEC = config.get("scaling_check", "config/published-scaling.yaml")
# The forward-time sensitivity (issue 14): the real K80 case, whose trace did not measure
# forward, replayed with forward = 0, 0.5 (the MG-WFBP simulator's assumption, the default)
# and 1 x backward.
FORWARD_CASE = {
    "compute": "googlenet-k80",
    "comm": "traces/comm/external/bcaffe-googlenet-tmp8comm.csv",
}
FORWARD_RATIOS = ["0", "0.5", "1"]
# Traces captured by this project (inventoried in the captured-* tables).
CAPTURED_TRACES = sorted(
    glob.glob("traces/compute/cpu/*.csv") + glob.glob("traces/comm/cpu/*.csv")
)


def figure_files(names=FIGURES):
    return [f"{FIG}/{name}.{ext}" for name in names for ext in ("pdf", "png")]


def table_files(names=TABLES):
    return [f"{TAB}/{name}.{ext}" for name in names for ext in ("tex", "md")]
