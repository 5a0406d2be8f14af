"""Kineto GPU traces -> a per-gradient compute trace and the comm record of one training step.

``gradsched import kineto TRACE --compute-out C.csv [--comm-out M.csv]`` (and the manifest's
``kineto-gpu`` importer) read a PyTorch profiler trace of a GPU training run in either schema:

* the new one (``cat`` ``cpu_op`` / ``cuda_runtime`` / ``kernel`` / ``gpu_memcpy`` /
  ``gpu_memset``; backward nodes wrapped in ``autograd::engine::evaluate_function: XBackward0``;
  the HolisticTraceAnalysis and PARAM test traces), and
* the old one (``cat`` ``Operator`` / ``Runtime`` / ``Kernel`` / ``Memcpy`` / ``Memset``;
  backward nodes are top-level ``XBackward`` operators; the kineto tb_plugin samples).

How the trace is read (the links PyTorch's profiler records, see kineto's
``libkineto/src/output_json.cpp`` and HTA's ``hta/common/trace_call_graph.py``):

1. One ``ProfilerStep#N`` span is used (``step`` picks it; by default the lower-median-length
   step among those with a backward, leaving out the first profiled step when there are three
   or more: it often holds warm-up work). With ``step_range`` R, the steps are the
   ``record_function`` ranges ``R<N>`` / ``R#N`` instead (e.g. ``gs:iteration3``). Only host
   spans count: the profiler's GPU-timeline copies (``gpu_user_annotation``) are not steps.
2. On every CPU thread, CPU ops nest by time; a *top-level op* is one not inside another CPU
   op (annotations such as ``ProfilerStep#N``, ``## forward ##`` or
   ``DistributedDataParallel.forward`` do not count as enclosing ops). Each GPU activity is
   linked to its launching runtime call by ``args.correlation``, and the runtime call to the
   top-level op that encloses it on its thread (the ``External id`` of the runtime call names
   the innermost op; enclosing by time gives the same op and also its ancestors).
3. Backward nodes are top-level ops named ``autograd::engine::evaluate_function: ...`` or
   carrying a non-zero ``Fwd thread id`` (old schema; forward ops record 0); gradient
   accumulations are top-level ops whose name ends in ``AccumulateGrad``. A node's
   ``Sequence number`` links it to the forward op that created it: the last top-level op on
   the forward thread (the thread of the ProfilerStep span) recording that number (old
   PyTorch also stamps ops that create no node with the current number).
4. Backward: walking the backward threads' top-level ops in launch order, the GPU kernel time
   (kernels, memcpy, memset; NCCL kernels excluded) of everything launched after one
   AccumulateGrad up to and including the next is that gradient's ``backward_s``, so the
   rows' sum is the backward kernel time up to the last gradient (``backward_tail_s`` in the
   sidecar is what follows it). The order of the AccumulateGrad ops is ``ready_order``.
5. Forward: the forward thread's top-level ops before the first backward node, from the op
   that created the lowest-numbered backward node on, that record a sequence number within
   the backward nodes' range (the autograd-recorded forward: data copies and ``zero_grad``
   are not) are walked in order; the kernel time since the previous parameter-owning op goes
   to the first row of the next op owning parameters. Kernel time after the last such op
   (the loss) goes to the last owning op and is stated as ``forward_tail_s``. Where the
   trace has ``nn.Module`` python_function events (``with_stack=True``), the ops inside a
   layer's own module call go to that layer (:mod:`.modules`). The sidecar states the
   method and the shares of each pass's kernel time on a layer (``forward_attributed_share``,
   ``forward_linked_share`` without the tail, ``backward_attributed_share``).
6. Rows (one per gradient) are in forward order: by the forward op owning them, and within
   one op in the reverse of their accumulation order (autograd accumulates a linear layer's
   bias before its weight). ``layer`` numbers the owning forward ops.
7. Parameter sizes come from the AccumulateGrad op's ``Input Dims`` / ``Input type`` where
   the trace was recorded with shapes; otherwise (and for names) from a parameter table
   (``params``: a CSV with ``name`` and ``numel`` and optionally ``bytes`` and
   ``ready_order``, e.g. a compute trace of the same model). Where both exist, the table's
   rows are matched to the gradients row by row, else on ``ready_order``, else by size where
   every size is unique, and every pair's sizes must agree (:mod:`.params`); without shapes
   the table is taken in forward order. The batch size comes from the input shapes of the
   first forward op, a convolution or an embedding lookup (:mod:`.batch`), else from
   ``batch_size``.
8. NCCL kernels launched inside the step are its collectives. Their metadata comes from the
   kernel's own args (``Collective name``, ``In msg nelems``, ``Out msg nelems``,
   ``Group size``, ``dtype``), else from the ``record_param_comms`` op with the same
   ``External id``, else from the ``nccl:<op>`` annotation enclosing the launch
   (``Input Dims`` x ``Input type``). ``bytes`` = max(in, out) elements x dtype size, as in
   :mod:`~gradsched.traces.importers.kineto`.
9. GPU busy share = union of the step's non-NCCL GPU activity / the step's GPU period (its
   first activity to the next step's first, :mod:`.busy`; the host span is not the GPU's
   when the host runs ahead), a fraction in [0, 1]. Below
   ``cpu_bound_share`` (0.8) the step is CPU-bound: the kernels' durations are still GPU
   times, but the step's length was set by the CPU; the sidecar says so and a warning is
   raised. Below 0.8 the GPU waits more than a fifth of the step; a GPU-bound step is at
   ~0.99 (the V100 ResNet-50 trace of HTA's tests), the HTA DDP trace at 0.18.
10. DDP buckets: when the step all-reduces, the sidecar checks that the all-reduce sizes
   partition the gradients taken in ready order (DDP fills buckets in the reverse of the
   parameters' registration order, ``torch/nn/parallel/distributed.py``
   ``_compute_bucket_assignment_by_size``), which also checks a parameter table.

11. Host time (``Options.host``, ``--host``; :mod:`.host`): a top-level op's host time is
   from its start to the next top-level op's start on its thread, less the waits for the
   GPU inside (synchronizing runtime calls; launch calls blocked on a full launch queue);
   the rows take it by the rules of items 4-5 as ``host_forward_s`` and ``host_backward_s``,
   with the launches counted as ``forward_launches`` and ``backward_launches``. Without the
   option the output is as before, byte for byte.

Several ranks of one step (a ``.tar.gz`` of traces, one per rank): the collectives of all ranks
go to one comm record. Ranks are aligned on their common collective sequence: a collective
ends at the same moment on every rank, so a rank's clock offset is the median difference of
its collectives' end times from those of the lowest rank.

Modules: :mod:`.options`, :mod:`.steps` (item 1), :mod:`.nesting` (item 2),
:mod:`.attribution` (items 3-6), :mod:`.modules` (item 5), :mod:`.busy` (item 9; the one
busy definition, which ``benchmarks/gpu/gpu_check.py`` reports too),
:mod:`.params` and :mod:`.batch` (item 7), :mod:`.collectives` (item 8),
:mod:`.step` (one rank's step), :mod:`.compute` (items 9-10), :mod:`.comm_record` (several
ranks) and :mod:`.importer`. Reading files (tar archives too) is
:mod:`gradsched.traces.importers.kineto.events`.
"""

from gradsched.traces.importers.kineto.events import read_documents
from gradsched.traces.importers.kineto_gpu.busy import StepBusy, busy_share, step_busy, trace_busy
from gradsched.traces.importers.kineto_gpu.collectives import Collective
from gradsched.traces.importers.kineto_gpu.comm_record import (
    RECORD_COLUMNS,
    RECORD_KIND,
    CommRecord,
    align_ranks,
    comm_record,
)
from gradsched.traces.importers.kineto_gpu.compute import build_compute
from gradsched.traces.importers.kineto_gpu.importer import KinetoGpuResult, import_kineto_gpu
from gradsched.traces.importers.kineto_gpu.options import Options
from gradsched.traces.importers.kineto_gpu.params import read_param_table
from gradsched.traces.importers.kineto_gpu.step import GpuStep, parse_gpu_step
from gradsched.traces.importers.kineto_gpu.steps import choose_step

__all__ = [
    "RECORD_COLUMNS",
    "RECORD_KIND",
    "Collective",
    "CommRecord",
    "GpuStep",
    "KinetoGpuResult",
    "Options",
    "StepBusy",
    "align_ranks",
    "build_compute",
    "busy_share",
    "choose_step",
    "comm_record",
    "import_kineto_gpu",
    "parse_gpu_step",
    "read_documents",
    "read_param_table",
    "step_busy",
    "trace_busy",
]
