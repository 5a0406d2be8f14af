"""The command-line parser: ``run`` takes torch's default bucket cap as ``default``."""

from __future__ import annotations

from gradsched.cli import build_parser


def test_run_takes_torchs_default_cap() -> None:
    args = build_parser().parse_args(["run", "--baseline", "ddp", "--bucket-cap-mb", "default",
                                      "--bucket-cap-mb", "2.5", "--model", "tiny-mlp",
                                      "--batch-size", "4", "--world-size", "2", "-o", "x.csv"])
    assert args.bucket_cap_mb == [None, 2.5]
