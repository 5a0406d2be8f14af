"""Link shaping of the emulated cluster: ``tc`` rates (``100mbit``, ``1gbit``) and the
parameters of the ``tbf`` qdisc that shapes each link to its rate."""

from __future__ import annotations

import re

from gradsched.errors import ConfigError

_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$", re.ASCII)
_RATE_UNITS = {  # tc's units, decimal: *bit are bits/s, *bps are BYTES/s
    "bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
    "bps": 8.0, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
}


def parse_rate(text: str) -> float:
    """A tc rate (``100mbit``, ``1gbit``, ``10gbit``, ``125mbps``) -> bits per second.

    Units are tc's, decimal: ``kbit``/``mbit``/``gbit`` are 1e3/1e6/1e9 bits/s and
    ``kbps``/``mbps``/``gbps`` are 1e3/1e6/1e9 *bytes*/s.
    """
    match = _RATE_RE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _RATE_UNITS:
        raise ConfigError(f"rate {text!r}: expected a number and a tc unit, e.g. 100mbit, "
                          f"1gbit, 10gbit (units: {', '.join(_RATE_UNITS)})")
    bits = float(match.group(1)) * _RATE_UNITS[unit]
    if bits < 1e5:
        raise ConfigError(f"rate {text!r} is below 100kbit; too slow to be useful")
    return bits


def rate_label(bits_per_s: float) -> str:
    """``1e9`` -> ``1gbit``, ``1e8`` -> ``100mbit`` (for file stems and messages)."""
    for unit, scale in (("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits_per_s >= scale:
            value = bits_per_s / scale
            return f"{value:g}{unit}"
    return f"{bits_per_s:g}bit"


def tbf_params(bits_per_s: float) -> tuple[int, float]:
    """(burst bytes, latency s) of the tbf qdisc for ``bits_per_s``.

    The bucket holds 2 ms of traffic (at least 64 KiB, one full GSO packet), so short
    bursts can exceed the rate by at most that much; the queue holds 50 ms.
    """
    burst = max(64 * 1024, int(bits_per_s / 8 * 0.002))
    return burst, 0.05


def line_rate_meta(cluster_rate: str | None) -> dict[str, float]:
    """``{"line_rate_Bps": bytes/s}`` of an emulated cluster's shaped links (the tbf rate,
    per rank and direction), which the wire floor of the cost models uses
    (:mod:`gradsched.costmodel.wire`); empty on loopback, where no rate is set."""
    if cluster_rate is None:
        return {}
    return {"line_rate_Bps": parse_rate(cluster_rate) / 8.0}


__all__ = ["line_rate_meta", "parse_rate", "rate_label", "tbf_params"]
