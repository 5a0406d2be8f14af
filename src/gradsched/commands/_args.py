"""Argument types shared by the sub-command modules (not a sub-command itself)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be positive")
    return value
