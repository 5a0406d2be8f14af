"""No raw reader outside the input gate: every read of a file's content in
``src/gradsched`` goes through :mod:`gradsched.io` (``read_bytes``, ``read_text``,
``read_json``, ``read_yaml``; ``parse_json``/``parse_yaml`` of text it read), tables through
:mod:`gradsched.intermediates`, kernel pseudo-files through :mod:`gradsched.procfs`.

The scan walks the source with :mod:`ast` (docstrings and comments do not count) and finds
every call that reads: ``open(...)`` for reading, ``X.open(...)`` (``Path.open``,
``gzip.open``, ``tarfile.open``, ...), ``.read_text()``, ``.read_bytes()``, ``json.load(s)``,
``yaml.load``, ``pd.read_csv`` and the other loaders below. Outside the gate modules each
one must be listed in :data:`ALLOWED` with the reason it is not a raw read of an input;
a new raw reader fails :func:`test_no_raw_reader_outside_the_gate`.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gradsched"

GATE_MODULES = {
    "io.py": "the gate itself: read_bytes (size bound, $GRADSCHED_MAX_INPUT_BYTES), "
             "read_text, the one JSON and YAML parsers; atomic_open writes",
    "intermediates.py": "tables: pandas parses the text io.read_text read",
    "procfs.py": "the gate of /proc and cgroup pseudo-files (bounded read, strict numbers)",
}

ALLOWED: dict[tuple[str, str, str], tuple[int, str]] = {
    ("traces/importers/kineto/events.py", "decode_trace_bytes", "json.loads"): (
        1, "parses bytes io.read_bytes read (or a tar member of them), with its own message "
           "for a truncated profile; deep nesting goes to io.parse_json"),
    ("traces/importers/kineto/events.py", "read_documents", "tarfile.open"): (
        1, "an archive in memory (fileobj=BytesIO of bytes io.read_bytes read), members "
           "bounded by admission.input_limit"),
    ("traces/validate.py", "read_csv_text", "pd.read_csv"): (
        1, "parses the text io.read_text read"),
    ("compression/train.py", "run_experiment", "json.loads"): (
        1, "a DataFrame's own to_json in memory, no file"),
    ("experiments/stragglers.py", "_json_members", "tarfile.open"): (
        1, "an archive in memory (fileobj=BytesIO of bytes io.read_bytes read), members "
           "bounded by admission.input_limit"),
    ("staging.py", "_write_through", "open"): (
        1, "copies gradsched's own stand-in output byte for byte into a device; nothing "
           "is parsed"),
    ("streams.py", "reserve_standard_fds", "os.open"): (
        1, "opens /dev/null on a closed descriptor 0, 1 or 2; nothing is read"),
    ("streams.py", "silence", "os.open"): (
        1, "opens /dev/null for writing over a failed standard output; nothing is read"),
}
"""``(file, function, call) -> (how many, why it is not a raw read of an input)``."""

LOADERS = {
    "json": {"load", "loads"},
    "yaml": {"load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all"},
    "pd": {"read_csv", "read_json", "read_table", "read_parquet", "read_pickle"},
    "pandas": {"read_csv", "read_json", "read_table", "read_parquet", "read_pickle"},
    "np": {"load", "loadtxt", "genfromtxt", "fromfile"},
    "numpy": {"load", "loadtxt", "genfromtxt", "fromfile"},
    "pickle": {"load", "loads"},
    "torch": {"load"},
    "tomllib": {"load", "loads"},
    "csv": {"reader", "DictReader"},
}
"""Module-level functions that parse a file or its text (``csv.reader`` of an in-memory
``io.StringIO`` is not flagged: see :func:`_reads`)."""


def _mode(call: ast.Call) -> str:
    node = call.args[1] if len(call.args) > 1 else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    return str(node.value) if isinstance(node, ast.Constant) else "r"


def _in_memory(call: ast.Call) -> bool:
    """``f(io.StringIO(...))`` / ``f(io.BytesIO(...))``: text or bytes already read."""
    first = call.args[0] if call.args else None
    return (isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute)
            and first.func.attr in ("StringIO", "BytesIO"))


def _reads(call: ast.Call) -> str | None:
    """The reading call ``call`` is (``open``, ``json.loads``, ...), or None."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "open":
        return "open" if not set(_mode(call)) & set("wax+") else None
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr in ("read_text", "read_bytes"):
        return func.attr
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if owner in LOADERS and func.attr in LOADERS[owner]:
        return None if owner == "csv" and _in_memory(call) else f"{owner}.{func.attr}"
    if func.attr == "open" and owner != "self":
        return f"{owner}.open" if owner else ".open"
    return None


def raw_readers(src: Path = SRC) -> Counter[tuple[str, str, str]]:
    """Every reading call outside the gate modules: ``(file, function, call) -> count``."""
    found: Counter[tuple[str, str, str]] = Counter()
    for path in sorted(src.rglob("*.py")):
        name = path.relative_to(src).as_posix()
        if name in GATE_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for function, node in _calls(tree):
            what = _reads(node)
            if what is not None:
                found[(name, function, what)] += 1
    return found


def _calls(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    """``(enclosing function or "<module>", call)`` for every call in ``tree``."""
    out: list[tuple[str, ast.Call]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                     else function)
            if isinstance(child, ast.Call):
                out.append((function, child))
            visit(child, inner)

    visit(tree, "<module>")
    return out


def test_no_raw_reader_outside_the_gate() -> None:
    found = raw_readers()
    unexpected = {k: n for k, n in found.items() if ALLOWED.get(k, (0, ""))[0] != n}
    assert unexpected == {}, (
        "raw readers outside the input gate (read through gradsched.io / procfs, or list "
        "them in ALLOWED with the reason): "
        + "; ".join(f"{f}:{fn}: {call} x{n}" for (f, fn, call), n in unexpected.items()))
    stale = sorted(set(ALLOWED) - set(found))
    assert stale == [], f"ALLOWED lists readers that are gone: {stale}"


def test_the_scan_finds_a_planted_raw_reader(tmp_path: Path) -> None:
    """The scan can fail: raw reads planted in a module are found, writes and in-memory
    parses are not, and a gate module is skipped."""
    pkg = tmp_path / "gradsched"
    (pkg / "runtime").mkdir(parents=True)
    (pkg / "runtime" / "planted.py").write_text(
        "import io, json, csv\nimport pandas as pd\nfrom pathlib import Path\n"
        "def a(p):\n    return json.loads(Path(p).read_text())\n"
        "def b(p):\n    with open(p) as fh:\n        return fh.read()\n"
        "def c(p):\n    return pd.read_csv(p)\n"
        "def d(p):\n    with open(p, 'w') as fh:\n        fh.write('x')\n"
        "def e(t):\n    return list(csv.reader(io.StringIO(t)))\n"
        "def f(p):\n    with Path(p).open() as fh:\n        return fh.read()\n",
        encoding="utf-8")
    (pkg / "io.py").write_text("def read_bytes(p):\n    return open(p, 'rb').read()\n",
                               encoding="utf-8")
    assert raw_readers(pkg) == Counter({
        ("runtime/planted.py", "a", "json.loads"): 1,
        ("runtime/planted.py", "a", "read_text"): 1,
        ("runtime/planted.py", "b", "open"): 1,
        ("runtime/planted.py", "c", "pd.read_csv"): 1,
        ("runtime/planted.py", "f", ".open"): 1,
    })
