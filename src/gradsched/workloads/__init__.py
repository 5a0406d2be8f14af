"""Workloads: the model zoo (:mod:`.zoo`) that capture, runtime, reexec and advise build
models from, by name, randomly initialised. Importing this package needs no torch."""

from gradsched.workloads.zoo import ModelSpec, build_model, model_names, torch_dtype

__all__ = ["ModelSpec", "build_model", "model_names", "torch_dtype"]
