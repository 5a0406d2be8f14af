"""Which ``ProfilerStep#N`` of a trace is imported (package docstring, item 1)."""

from __future__ import annotations

from gradsched.errors import InputError
from gradsched.traces.importers.kineto.events import STEP_RE, Event


def _steps(events: list[Event], label: str) -> list[tuple[int, Event]]:
    steps = sorted(((int(m.group(1)), ev) for ev in events
                    if (m := STEP_RE.match(ev.name))), key=lambda s: s[1].ts)
    if not steps:
        raise InputError("no ProfilerStep#N spans: the GPU import needs one training step "
                         "(profile with a schedule and call prof.step())", path=label,
                         field="traceEvents")
    return steps


def _has_backward(events: list[Event], step: Event) -> bool:
    return any(ev.name.endswith("AccumulateGrad") and step.ts <= ev.ts < step.end
               for ev in events)


def choose_step(events: list[Event], label: str, wanted: int | None) -> tuple[int, Event,
                                                                                list[int]]:
    """The step to import: ``wanted``, else the lower-median-length step with a backward
    (the first profiled step left out when three or more have one)."""
    steps = _steps(events, label)
    numbers = [n for n, _ in steps]
    if wanted is not None:
        for number, ev in steps:
            if number == wanted:
                return number, ev, numbers
        raise InputError(f"no ProfilerStep#{wanted} (the trace has steps "
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
