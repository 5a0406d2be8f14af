"""Re-execute plans for real: the PyTorch plan executor and the timed runs behind
``gradsched run`` (see ``docs/executor.md``)."""

from gradsched.runtime.executor import ExecutorError, PlanExecutor, Reduction, launch_order
from gradsched.runtime.step_collectives import StepStats

__all__ = ["ExecutorError", "PlanExecutor", "Reduction", "StepStats", "launch_order"]
