"""PyTorch profiler (Kineto / Chrome trace JSON) -> per-iteration and per-collective tables.

``gradsched import kineto TRACE.json[.gz] [...] -o PREFIX`` writes

* ``PREFIX.iterations.csv`` -- one row per (file, ``ProfilerStep#N``): ``rank``,
  ``iteration`` (N), ``start_s``, ``end_s``, ``iteration_s``, ``comm_s`` (time during which
  at least one collective of the iteration runs), ``overlap_s`` (the part of ``comm_s``
  during which computation runs too), ``exposed_comm_s`` (``comm_s - overlap_s``),
  ``n_collectives``, ``comm_bytes``;
* ``PREFIX.collectives.csv`` -- one row per collective: ``rank``, ``iteration``,
  ``collective``, ``bytes``, ``world_size``, ``start_s``, ``duration_s``,
  ``recorded_duration_s``, ``stream`` (GPU stream or CPU thread), ``source``, ``dtype``, ``nelems``;
* ``PREFIX.meta.json`` -- the files, their ranks, backends and sources, warnings and these
  definitions.

Times are seconds from the start of the first ``ProfilerStep`` of the same file (trace
timestamps are microseconds). Rows keep the file name so several ranks can be compared.

Where collectives come from (the first kind present in a file is used):

1. ``nccl-kernel`` -- GPU kernels (``cat`` ``kernel``) named ``ncclKernel_*`` or
   ``ncclDevKernel_*``. Their ``args`` carry PyTorch's collective metadata
   (``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``Group size``,
   ``dtype``); where a kernel lacks them, the ``record_param_comms`` CPU event with the same
   ``External id`` supplies them. The kernel name is only used for the collective's
   operation when no metadata exists (never for NCCL's algorithm or protocol).
2. ``gloo`` -- the ``gloo:<op>`` spans recorded on gloo's worker threads (the actual
   execution of the collective); sizes from ``Input Dims`` and ``Input type`` (recorded
   with ``record_shapes=True``).
3. ``record_param_comms`` -- CPU spans carrying the collective metadata (other backends).
4. ``c10d`` -- ``c10d::allreduce_`` etc. on the calling thread. For asynchronous backends
   these are only the time to *enqueue* the operation; the sidecar warns about it.

CPU collective spans (gloo, record_param_comms, c10d) are clipped at the end of their step
and at the start of the next span on the same thread (``duration_s``);
``recorded_duration_s`` keeps the recorded length. Reason: gloo's worker thread records a
span's end after signalling completion, and on a loaded CPU it can be descheduled in
between, so recorded ends can lie long after the step that already consumed the result
(seen on the shared 2-core capture machine). ``--no-clip`` keeps the recorded spans.
GPU kernels are never clipped.

``bytes`` = max(in, out) elements x the dtype's size, which is nccl-tests' ``size``: the
buffer of all_reduce / broadcast / reduce and the total (gathered output or scattered
input) buffer of all_gather / reduce_scatter. For gloo spans, which record only the
inputs, an all_gather's bytes are the input bytes x the group size.

Computation for the overlap: on a GPU trace, the non-NCCL kernels, memcpys and memsets; on
a CPU trace, the ``cpu_op`` spans of the threads that run no collective, minus the
communication ops themselves (``c10d::*``, ``record_param_comms``, ``gloo:*``, ``nccl:*``)
and minus explicit waits (names containing ``wait``). Annotation spans such as
``ProfilerStep`` or ``DistributedDataParallel.forward`` are not computation.

Modules: :mod:`.events` (reading files into checked events), :mod:`.intervals` (interval
algebra), :mod:`.comm_meta` (collective names, dtype sizes, metadata in ``args``),
:mod:`.sources` (collective rows by source, clipping of CPU spans) and :mod:`.iterations`
(the tables). The GPU path is :mod:`gradsched.traces.importers.kineto_gpu`.
"""

from gradsched.traces.importers.kineto.comm_meta import DTYPE_BYTES, normalise_collective
from gradsched.traces.importers.kineto.events import decode_trace_bytes, read_trace_json
from gradsched.traces.importers.kineto.iterations import (
    COLLECTIVE_COLUMNS,
    ITERATION_COLUMNS,
    KinetoFile,
    KinetoImport,
    import_kineto,
    parse_kineto,
)

__all__ = [
    "COLLECTIVE_COLUMNS",
    "DTYPE_BYTES",
    "ITERATION_COLUMNS",
    "KinetoFile",
    "KinetoImport",
    "decode_trace_bytes",
    "import_kineto",
    "normalise_collective",
    "parse_kineto",
    "read_trace_json",
]
