"""The links gradsched runs on and names in its outputs: one table for the package and the workflow.

Each re-execution, capture and sweep names its network by a short key that appears in case
names (``resnet18-b4-p2-tbf1gbit``), file names and result columns. The key says how the
ranks were connected: ``loopback`` is gloo over 127.0.0.1 on one machine (unshaped); the
``tbf*`` keys are the emulated cluster, one network namespace per rank joined by veth pairs
and shaped by a ``tc tbf`` qdisc at the given rate (the rate is ``tc``'s unit grammar, as in
``tc-tbf(8)``). The workflow (``workflow/rules/reexec.smk``) and the report read this table;
no other module spells these keys or rates.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.errors import ConfigError


@dataclass(frozen=True)
class Network:
    """One link kind: its key, its ``tc`` rate (None: unshaped loopback) and its labels."""

    key: str
    tc_rate: str | None
    short_label: str
    long_label: str


NETWORKS: dict[str, Network] = {
    net.key: net
    for net in (
        Network("loopback", None, "lo", "loopback"),
        Network("tbf1gbit", "1gbit", "1G", "1 Gbit/s"),
        Network("tbf100mbit", "100mbit", "100M", "100 Mbit/s"),
    )
}
"""Every network key, in the order the report lists them."""


def network(key: str) -> Network:
    """The table's entry for ``key``; a :class:`ConfigError` naming the known keys otherwise."""
    try:
        return NETWORKS[key]
    except KeyError:
        raise ConfigError(
            f"unknown network {key!r}: expected one of {', '.join(NETWORKS)}"
        ) from None


def tc_rate(key: str) -> str | None:
    """The emulated cluster's ``tc`` rate of ``key`` (``"1gbit"``), or None for loopback."""
    return network(key).tc_rate
