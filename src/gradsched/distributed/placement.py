"""Where the ranks of one measurement run (:class:`Launch`): a description checked once
where a command parses its arguments and passed whole to the measurement
(:func:`gradsched.runtime.rounds.launch_rounds`,
:func:`gradsched.capture.interference.calibrate`)."""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.errors import ConfigError


@dataclass(frozen=True)
class Launch:
    """Where the ranks of one measurement run, beside its timing settings: the workers
    (``world_size``; a timing's parameter servers come on top), the backend, threads per
    rank, loopback or the emulated cluster shaped to ``cluster``, and the launch's own
    limits (``deadline_s``; ``busy_limit_cores``: refuse a busy machine, ``what`` naming
    the measurement). Checked when made."""

    world_size: int
    backend: str = "gloo"
    threads: int = 1
    cluster: str | None = None
    deadline_s: float | None = None
    busy_limit_cores: float | None = None
    what: str = "measurement"

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ConfigError("--world-size must be >= 1")
        if self.backend not in ("gloo", "nccl"):
            raise ConfigError(f"backend must be gloo or nccl, not {self.backend!r}")


__all__ = ["Launch"]
