"""Telling a rank that failed from the peers that failed because it vanished.

When one rank dies, its peers' pending collectives fail within milliseconds: gloo's TCP
pair reports ``Connection reset by peer`` or ``Connection closed by peer``
(``third_party/gloo/gloo/transport/tcp/pair.cc``, ``Pair::read``/``Pair::write``), or the
wait times out; NCCL raises ``DistBackendError`` once the communicator is aborted. The
dying rank's own exit is seen by the launcher only after the kernel has torn down its
threads and memory, so exit times alone can name a peer as the cause (a 2-core machine
under load showed it). A rank whose task failed *in a collective* therefore exits with
:data:`PEER_LOST`, distinct from :data:`TASK_FAILED`; the launcher blames the ranks that
did not (:func:`gradsched.distributed.launch.launch`), and falls back to exit times only
when every failed rank lost a peer (a network failure looks the same from every side).
"""

from __future__ import annotations

import sys

TASK_FAILED = 4
"""Exit code of a rank whose task raised an error of its own."""

PEER_LOST = 6
"""Exit code of a rank whose task failed because a collective failed or timed out."""

_PEER_LOSS_MARKERS = (
    "connection reset by peer",
    "connection closed by peer",
    "broken pipe",
    "timed out",
    "did not complete within",
    "nccl communicator was aborted",
)
"""Lower-case fragments of the errors gloo and NCCL raise when a peer vanished or a
collective timed out (gloo ``pair.cc``: read and write errors; ``ProcessGroupGloo``
timeouts: ``Timed out waiting ... for recv``; the executors' own ``did not complete``)."""


def lost_a_peer(exc: BaseException) -> bool:
    """Whether ``exc`` or an error it was raised from is a failed or timed-out collective.

    Walks ``__cause__``/``__context__``; a ``torch.distributed.DistError`` (NCCL's
    backend, network and store errors) counts whatever its message, looked up only if
    torch is already imported (a rank that failed before importing it lost no peer)."""
    dist_error = _dist_error_type()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if dist_error is not None and isinstance(current, dist_error):
            return True
        text = str(current).lower()
        if any(marker in text for marker in _PEER_LOSS_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


def _dist_error_type() -> type[BaseException] | None:
    dist = sys.modules.get("torch.distributed")
    error = getattr(dist, "DistError", None) if dist is not None else None
    return error if isinstance(error, type) and issubclass(error, BaseException) else None


__all__ = ["PEER_LOST", "TASK_FAILED", "lost_a_peer"]
