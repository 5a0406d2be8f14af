"""Multi-process launching with timeouts: every rank exits with a clear message if a peer
dies, and nothing hangs. Used by capture, the executor, collectives and compression.

The emulated cluster (network namespaces joined by shaped links, :mod:`.cluster`) that the
ranks can run in lives here too."""

from gradsched.distributed.launch import DistributedError, LaunchSpec, launch

__all__ = ["DistributedError", "LaunchSpec", "launch"]
