"""Which ``ProfilerStep#N`` of a trace is imported (package docstring, item 1).

Steps are the host-side spans ``ProfilerStep#N`` that ``prof.step()`` records, or, with a
step range name ``R`` (``--step-range``), the ``record_function`` ranges ``R<N>`` / ``R#N``
a training loop opened around each iteration (e.g. ``gs:iteration3``). The profiler mirrors
such ranges on the GPU timeline (``cat`` ``gpu_user_annotation``: the span of the GPU work
the range launched); those copies are not steps (their start is the first kernel's, not the
iteration's).
"""

from __future__ import annotations

import re

from gradsched.errors import InputError
from gradsched.traces.importers.kineto.events import STEP_RE, Event, check_step_names

_GPU_COPY = "gpu_user_annotation"


def step_pattern(step_range: str | None) -> re.Pattern[str]:
    """``ProfilerStep#N``, or ``R<N>`` / ``R#N`` for a named range ``R``."""
    if step_range is None:
        return STEP_RE
    return re.compile(rf"^{re.escape(step_range)}#?([0-9]+)$")


def _step_like(step_range: str | None) -> re.Pattern[str] | None:
    """Names of the step form with a number that is not a whole number (``R-1``)."""
    if step_range is None:
        return None
    return re.compile(rf"^{re.escape(step_range)}#?(-|[0-9]).*$")


def _steps(events: list[Event], label: str, step_range: str | None = None
           ) -> list[tuple[int, Event]]:
    pattern = step_pattern(step_range)
    like = _step_like(step_range)
    host = [ev for ev in events if ev.cat != _GPU_COPY]
    if like is None:
        check_step_names(host, label)
    else:
        check_step_names(host, label, like, pattern)
    steps = sorted(((int(m.group(1)), ev) for ev in events
                    if ev.cat != _GPU_COPY and (m := pattern.match(ev.name))),
                   key=lambda s: s[1].ts)
    if not steps:
        what = (f"no {step_range}N ranges" if step_range is not None
                else "no ProfilerStep#N spans")
        raise InputError(f"{what}: the GPU import needs one training step (profile with a "
                         "schedule and call prof.step(), or name the record_function range "
                         "around each iteration with --step-range)", path=label,
                         field="traceEvents")
    return steps


def _has_backward(events: list[Event], step: Event) -> bool:
    return any(ev.name.endswith("AccumulateGrad") and step.ts <= ev.ts < step.end
               for ev in events)


def choose_step(events: list[Event], label: str, wanted: int | None,
                step_range: str | None = None) -> tuple[int, Event, list[int]]:
    """The step to import: ``wanted``, else the lower-median-length step with a backward
    (the first profiled step left out when three or more have one)."""
    steps = _steps(events, label, step_range)
    numbers = [n for n, _ in steps]
    if wanted is not None:
        for number, ev in steps:
            if number == wanted:
                return number, ev, numbers
        name = f"ProfilerStep#{wanted}" if step_range is None else f"{step_range}{wanted}"
        raise InputError(f"no {name} (the trace has steps "
                         f"{', '.join(map(str, numbers))})", path=label, field="step")
    with_bwd = [(n, ev) for n, ev in steps if _has_backward(events, ev)]
    if not with_bwd:
        raise InputError(f"no backward in any of the steps {', '.join(map(str, numbers))} "
                         "(no AccumulateGrad op): not a training trace", path=label,
                         field="traceEvents")
    if len(with_bwd) >= 3:
        with_bwd = with_bwd[1:]
    ranked = sorted(with_bwd, key=lambda s: (s[1].dur, s[1].ts))
    number, ev = ranked[(len(ranked) - 1) // 2]
    return number, ev, numbers


def next_step(events: list[Event], step: Event, step_range: str | None = None
              ) -> Event | None:
    """The step span that follows ``step`` on the host, if any."""
    later = [ev for _, ev in _steps(events, "", step_range) if ev.ts > step.ts]
    return later[0] if later else None
