"""Re-execute plans for real: the PyTorch plan executor and the timed runs behind
``gradsched run`` (see ``docs/executor.md``)."""

from gradsched.runtime.executor import ExecutorError, PlanExecutor, StepStats, launch_order

__all__ = ["ExecutorError", "PlanExecutor", "StepStats", "launch_order"]
