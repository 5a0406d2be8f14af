"""Multi-process launching with timeouts: every rank exits with a clear message if a peer
dies, and nothing hangs. Used by capture, the executor, collectives and compression."""

from gradsched.distributed.launch import DistributedError, LaunchSpec, launch

__all__ = ["DistributedError", "LaunchSpec", "launch"]
