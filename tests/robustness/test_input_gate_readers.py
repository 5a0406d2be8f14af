"""Every reader of a whole table goes through the input gate (:mod:`gradsched.io`): a file
above ``$GRADSCHED_MAX_INPUT_BYTES`` is refused before pandas sees it, with one line naming
the file. Table-driven over the converted readers (their public entry points), plus the
topology world-size limit naming its file. All inputs are SYNTHETIC (made below).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gradsched.errors import InputError
from gradsched.io import INPUT_LIMIT_ENV

LIMIT = 64
"""The bound the tests set: above every auxiliary file below, below the table."""

TABLE = "a,b,c\n" + "1,2,3\n" * 40
"""A SYNTHETIC CSV of 246 bytes: well beyond :data:`LIMIT`."""


def _comm_record(d: Path, big: Path) -> object:
    from gradsched.traces.bundle import meta_path
    from gradsched.traces.importers.kineto_gpu.comm_record import RECORD_KIND, CommRecord

    meta_path(big).write_text(json.dumps({"kind": RECORD_KIND}), encoding="utf-8")
    return CommRecord.load(big)


def _params(d: Path, big: Path) -> object:
    from gradsched.traces.importers.kineto_gpu.params import read_param_table

    return read_param_table(big)


def _error_summary(d: Path, big: Path) -> object:
    from gradsched.report.collectives import error_summary

    return error_summary(big)


def _busbw(d: Path, big: Path) -> object:
    from gradsched.report.compare import recomputed_avg_busbw

    return recomputed_avg_busbw(big)


def _nccl_log(d: Path, big: Path) -> object:
    from gradsched.report.compare import printed_avg_busbw

    return printed_avg_busbw(big)


def _bcaffe_log(d: Path, big: Path) -> object:
    from gradsched.report.compare import bcaffe_last_dump

    return bcaffe_last_dump(big)


def _host_check(d: Path, big: Path) -> object:
    from gradsched.report.host_check import write_host_check_table

    return write_host_check_table(big, d / "t.tex", d / "t.md")


def _compression(d: Path, big: Path) -> object:
    from gradsched.report.compression import accuracy_vs_step

    return accuracy_vs_step(big, d / "f.pdf", d / "f.png")


def _comm_nodes(d: Path, big: Path) -> object:
    from gradsched.report.collect import comm_nodes

    return comm_nodes(big)


def _extrapolated(d: Path, big: Path) -> object:
    from gradsched.report.collect import extrapolated_nodes

    return extrapolated_nodes(big, 64)


def _fit_curves(d: Path, big: Path) -> object:
    from gradsched.report.fits_figures import fit_curves

    return fit_curves([big], [], None, d / "f.pdf", d / "f.png")


def _scaling_table(d: Path, big: Path) -> object:
    from gradsched.report.scaling import write_scaling_table

    return write_scaling_table(big, d / "t.tex", d / "t.md")


def _scaling_macros(d: Path, big: Path) -> object:
    from gradsched.report.scaling import write_scaling_macros

    return write_scaling_macros(big, d / "m.tex")


def _timeline(d: Path, big: Path) -> object:
    from gradsched.report.timeline import timeline

    return timeline({"wfbp": big}, d / "f.pdf", d / "f.png")


def _pricing(d: Path, big: Path) -> object:
    from gradsched.compression.pricing import compute_cost_from_profile

    return compute_cost_from_profile(big, "topk", 1 / 64)


def _latex_log(d: Path, big: Path) -> object:
    from gradsched.report.latexlog import check_log

    return check_log(big)


def _captions(d: Path, big: Path) -> object:
    from gradsched.report.captions import paper_source

    return paper_source(big)


def _claims(d: Path, big: Path) -> object:
    from gradsched.report.claims import write_claims

    return write_claims(big, d / "claims.md")


READERS: dict[str, Callable[[Path, Path], object]] = {
    "report.latexlog:check_log": _latex_log,
    "report.captions:paper_source": _captions,
    "report.claims:write_claims": _claims,
    "kineto_gpu.comm_record:CommRecord.load": _comm_record,
    "kineto_gpu.params:read_param_table": _params,
    "report.collectives:error_summary": _error_summary,
    "report.compare:recomputed_avg_busbw": _busbw,
    "report.compare:printed_avg_busbw": _nccl_log,
    "report.compare:bcaffe_last_dump": _bcaffe_log,
    "report.host_check:write_host_check_table": _host_check,
    "report.compression:accuracy_vs_step": _compression,
    "report.collect:comm_nodes": _comm_nodes,
    "report.collect:extrapolated_nodes": _extrapolated,
    "report.fits_figures:fit_curves": _fit_curves,
    "report.scaling:write_scaling_table": _scaling_table,
    "report.scaling:write_scaling_macros": _scaling_macros,
    "report.timeline:timeline": _timeline,
    "compression.pricing:compute_cost_from_profile": _pricing,
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_refuses_an_input_beyond_the_bound(
        reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big-table.csv"
    big.write_text(TABLE, encoding="utf-8")
    monkeypatch.setenv(INPUT_LIMIT_ENV, str(LIMIT))
    with pytest.raises(InputError) as caught:
        READERS[reader](tmp_path, big)
    message = str(caught.value)
    assert "\n" not in message, message
    assert caught.value.path == str(big), message
    assert message.startswith(str(big)), message
    assert INPUT_LIMIT_ENV in message and f"bound of {LIMIT} bytes" in message, message


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_frame_unchanged_within_the_bound(
        reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within the bound the gate is invisible: what the reader raises or returns is not
    a refusal by size."""
    big = tmp_path / "big-table.csv"
    big.write_text(TABLE, encoding="utf-8")
    monkeypatch.setenv(INPUT_LIMIT_ENV, str(10 * len(TABLE)))
    try:
        READERS[reader](tmp_path, big)
    except Exception as exc:  # the table's columns are not what the reader wants
        assert INPUT_LIMIT_ENV not in str(exc), exc


def test_read_csv_frame_is_pandas_read_csv(tmp_path: Path) -> None:
    """The gate's CSV reader returns the frame ``pandas.read_csv(path)`` returns: same
    values, same dtypes, with ``comment=``/``usecols=`` passed through."""
    import pandas as pd

    from gradsched.intermediates import read_csv_frame

    path = tmp_path / "t.csv"
    path.write_bytes(b"\xef\xbb\xbf# a comment\r\nname,n,x,flag,empty\r\n"
                     b"\"a,b\",1,2.5,True,\r\nc\xc3\xa9,2,,False,\r\n")
    for kwargs in ({"comment": "#"}, {"comment": "#", "usecols": ["n", "x"]},
                   {"comment": "#", "dtype": str, "keep_default_na": False}):
        expected = pd.read_csv(path, **kwargs)
        got = read_csv_frame(path, **kwargs)
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
        assert list(got.dtypes) == list(expected.dtypes)


TOPOLOGY_LEVEL = "{kind: analytic, alpha_s: 1.0e-6, beta_s_per_byte: 1.0e-10, algorithm: ring}"


@pytest.mark.parametrize(("fields", "field", "needle"), [
    ("nodes: 1024\nranks_per_node: 1025\n", "ranks_per_node", "world size limit"),
    ("nodes: 1024\nworld_size: 1074176\n", "world_size", "maximum of 1048576"),  # schema
])
def test_topology_world_size_limit_names_the_file(fields: str, field: str, needle: str,
                                                   tmp_path: Path) -> None:
    from gradsched.costmodel.topology import load_topology

    path = tmp_path / "huge-topology.yaml"
    path.write_text(f"{fields}intra: {TOPOLOGY_LEVEL}\ninter: {TOPOLOGY_LEVEL}\n",
                    encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_topology(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}, field '{field}'"), message
    assert needle in message, message
