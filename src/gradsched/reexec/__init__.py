"""Re-execution experiment: replay predictions vs real runs of the same plans.

* :mod:`gradsched.reexec.experiment` -- cases -> plans -> measured runs (executor, PyTorch
  DDP, compute-only control) -> predictions -> one CSV; the facade of
  :mod:`~gradsched.reexec.config` (cases, settings, interference JSON),
  :mod:`~gradsched.reexec.run` (plans and measurement) and
  :mod:`~gradsched.reexec.predict` (predictions next to the measurements).
* :mod:`gradsched.reexec.interference` -- calibrate the replay's compute / communication
  interference factors on the machine at hand (gloo or NCCL).
* :mod:`gradsched.reexec.analysis` -- per-plan errors, median |error|, worst, Kendall tau.
"""

from __future__ import annotations

__all__ = ["analysis", "config", "experiment", "interference", "predict", "run"]
