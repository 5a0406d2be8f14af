"""A contiguous plan as PyTorch DDP's ``bucket_cap_mb_list``: per-bucket caps in MiB that
make stock ``DistributedDataParallel`` rebuild exactly the plan's buckets.

Why it works (torch 2.14.1, ``torch/nn/parallel/distributed.py``):

* ``_BucketCapacityConfig.create`` turns each entry into bytes as
  ``int(cap_mb * _MB_TO_BYTES)`` with ``_MB_TO_BYTES = 1024 * 1024``;
* ``compute_bucket_size_limits`` returns that list both for the constructor's buckets and
  *for rebuilding* (its "Case 1"), so ``Reducer::rebuild_buckets`` fills the
  gradient-ready order of the first iteration with these limits
  (``compute_bucket_assignment_by_size``: add the tensor, close the bucket once its bytes
  reach the limit; the k-th bucket uses the k-th limit, the last repeats).

So a bucket of B bytes whose last (latest-ready) member has L bytes is rebuilt exactly
when its limit c (in bytes) satisfies ``B - L < c <= B``: at or below B the bucket closes
at its last member, above B - L it does not close before it. The last bucket closes at the
end of the tensors for any ``c > B - L``.

Caps are floats. ``exact_mb`` = B / 2**20 is exact in binary (a power-of-two scaling), so
``int(cap * 2**20)`` gives back B. Rounding a cap to a few decimals is safe only inside the
window above: rounding *up* past B lets the bucket absorb the next tensor, rounding *down*
to B - L or below closes it one tensor early, and either shifts every later bucket.
``paste_mb`` is, per bucket, the shortest decimal in MiB inside its window (checked with
torch's own float arithmetic), which is what :meth:`DdpCaps.paste_line` prints.

Only a plan of the *WFBP family* can be expressed (contiguous runs of the ready order, one
``all_reduce`` each, in ready order, global update, no chunks, priorities, release times,
channels, credit or collective algorithm): anything else is refused with an
:class:`~gradsched.errors.InputError` naming the property. DDP keeps one bucket sequence
per (dtype, device); a trace has one dtype, so one sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.errors import InputError
from gradsched.plan import Plan
from gradsched.planners._family import MB, ready_seq
from gradsched.traces.bundle import ComputeTrace

MAX_DECIMALS = 12  # beyond this the exact binary value is printed


@dataclass(frozen=True)
class DdpCaps:
    """Per-bucket caps for ``DistributedDataParallel(bucket_cap_mb_list=...)``."""

    bucket_bytes: tuple[int, ...]
    last_member_bytes: tuple[int, ...]
    exact_mb: tuple[float, ...]
    paste_mb: tuple[float, ...]

    @property
    def n_buckets(self) -> int:
        return len(self.bucket_bytes)

    def paste_line(self, model: str = "model") -> str:
        """The constructor call a user pastes into stock PyTorch."""
        caps = ", ".join(repr(c) for c in self.paste_mb)
        return f"DistributedDataParallel({model}, bucket_cap_mb_list=[{caps}])"


def torch_cap_bytes(cap_mb: float) -> int:
    """Bytes of one cap as ``_BucketCapacityConfig.create`` computes them."""
    return int(cap_mb * MB)


def cap_window(total: int, last: int, *, is_last_bucket: bool) -> tuple[int, int | None]:
    """(exclusive low, inclusive high) bytes of the caps that rebuild a bucket of ``total``
    bytes whose last member has ``last`` bytes; the last bucket has no upper bound."""
    return total - last, (None if is_last_bucket else total)


def shortest_cap_mb(total: int, last: int, *, is_last_bucket: bool = False) -> float:
    """The shortest decimal number of MiB whose cap falls in :func:`cap_window`."""
    low, high = cap_window(total, last, is_last_bucket=is_last_bucket)
    exact = total / MB
    for decimals in range(MAX_DECIMALS + 1):
        scale = 10**decimals
        for candidate in (int(exact * scale) / scale, (int(exact * scale) + 1) / scale):
            cap = torch_cap_bytes(candidate)
            if candidate > 0 and cap > low and (high is None or cap <= high):
                return candidate
    return exact


def _refuse(plan: Plan, why: str, field: str = "buckets") -> InputError:
    return InputError(f"plan '{plan.algorithm}' cannot be expressed as DDP's "
                      f"bucket_cap_mb_list: {why}", field=field)


def check_expressible(plan: Plan) -> None:
    """Refuse a plan whose schedule stock DDP cannot run, naming the property."""
    if plan.update != "global":
        raise _refuse(plan, f"update is {plan.update!r}; DDP updates once after all "
                      "communication (global)", "update")
    if plan.channels not in (None, 1):
        raise _refuse(plan, f"channels={plan.channels}; DDP runs its all-reduces on one "
                      "stream, one at a time", "channels")
    if plan.credit_bytes is not None:
        raise _refuse(plan, "it has a credit (ByteScheduler); DDP has none", "credit_bytes")
    for index, bucket in enumerate(plan.buckets):
        where = f"bucket {index}"
        if bucket.collective != "all_reduce":
            raise _refuse(plan, f"{where} uses {bucket.collective!r}; DDP all-reduces "
                          "every bucket", "collective")
        if bucket.chunks != 1:
            raise _refuse(plan, f"{where} has {bucket.chunks} chunks; DDP sends a bucket "
                          "in one all-reduce", "chunks")
        if bucket.priority is not None:
            raise _refuse(plan, f"{where} has a priority; DDP launches buckets in ready "
                          "order", "priority")
        if bucket.release_s is not None:
            raise _refuse(plan, f"{where} has a release time; DDP launches a bucket as soon "
                          "as it is ready", "release_s")
        if bucket.algorithm != "default":
            raise _refuse(plan, f"{where} names the collective algorithm "
                          f"{bucket.algorithm!r}; DDP uses the backend's own", "algorithm")


def ddp_caps(plan: Plan, trace: ComputeTrace) -> DdpCaps:
    """The ``bucket_cap_mb_list`` that rebuilds ``plan``'s buckets for ``trace``."""
    check_expressible(plan)
    seq = ready_seq(trace)
    plan.check_covers(seq.names)
    position = {name: i for i, name in enumerate(seq.names)}
    totals: list[int] = []
    lasts: list[int] = []
    start = 0
    for index, bucket in enumerate(plan.buckets):
        members = sorted(position[name] for name in bucket.tensors)
        expected = list(range(start, start + len(members)))
        if members != expected:
            first_off = next(p for p, q in zip(members, expected, strict=True) if p != q)
            raise _refuse(plan, f"bucket {index} is not the next contiguous run of the "
                          f"gradient-ready order (it holds ready position {first_off}, "
                          f"expected {expected[0]}..{expected[-1]}: "
                          f"{seq.names[first_off]!r})")
        totals.append(int(sum(int(seq.nbytes[p]) for p in members)))
        lasts.append(int(seq.nbytes[members[-1]]))
        start += len(members)
    n = len(totals)
    paste = tuple(shortest_cap_mb(t, last, is_last_bucket=(k == n - 1))
                  for k, (t, last) in enumerate(zip(totals, lasts, strict=True)))
    return DdpCaps(bucket_bytes=tuple(totals), last_member_bytes=tuple(lasts),
                   exact_mb=tuple(t / MB for t in totals), paste_mb=paste)


def rebuilt_groups(sizes: list[int], caps_mb: list[float]) -> list[int]:
    """Bucket ends over ``sizes`` (bytes, ready order) as torch's
    ``compute_bucket_assignment_by_size`` forms them from a ``bucket_cap_mb_list``: the
    pure-Python mirror used to check caps without torch."""
    limits = [torch_cap_bytes(c) for c in caps_mb]
    ends: list[int] = []
    total = 0
    for i, size in enumerate(sizes):
        total += int(size)
        if total >= limits[min(len(ends), len(limits) - 1)]:
            ends.append(i + 1)
            total = 0
    if not ends or ends[-1] != len(sizes):
        ends.append(len(sizes))
    return ends
