"""How the re-execution's cases and intervals read in its tables and macros:
``resnet50-b2-p2-tbf1gbit`` as ``ResNet-50 b2`` (a row) or ``resnet50 b2 P=2 1 Gbit/s`` (a
list in the prose), a network key as its label, a value with its 95 % interval as
``1.07 [1.06, 1.08]``."""

from __future__ import annotations

import re

from gradsched.networks import NETWORKS
from gradsched.report.formatting import MISSING, fmt
from gradsched.report.latex import latex_escape


def case_label(case: str) -> str:
    """``resnet50-b2-p2-tbf1gbit`` -> ``ResNet-50 b2``."""
    names = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2",
             "bert-base": "BERT-base"}
    match = re.match(r"^(?P<model>.+?)(?:-s\d+)?-b(?P<batch>\d+)-p\d+-", case)
    if match is None:
        return case
    return f"{names.get(match['model'], match['model'])} b{match['batch']}"


def network_label(network: str) -> str:
    """``tbf1gbit`` -> ``1 Gbit/s`` (:data:`gradsched.networks.NETWORKS`); unknown keys as
    they are."""
    return NETWORKS[network].long_label if network in NETWORKS else network


def with_interval(value: object, lo: object, hi: object, digits: int) -> str:
    point = fmt(value, digits)
    if point == MISSING:
        return point
    return f"{point} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


def case_network_label(case: str) -> str:
    """``resnet50-b2-p2-tbf1gbit`` -> ``resnet50 b2 P=2 1 Gbit/s`` (network label of
    :data:`gradsched.networks.NETWORKS`)."""
    *head, net = case.split("-")
    label = NETWORKS[net].long_label if net in NETWORKS else net
    parts = [p if not (p.startswith("p") and p[1:].isdigit()) else f"P={p[1:]}" for p in head]
    return latex_escape(" ".join([*parts, label]))
