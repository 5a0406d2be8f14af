"""The model zoo: models by name, randomly initialised (capture, runtime, reexec and
advise build their models here).

Every entry builds ``(model, make_batch, loss)``:

* ``model`` -- a ``torch.nn.Module`` in training mode, on the requested device and dtype,
  with **random initialisation** (torchvision ``weights=None``; transformers models built
  from a config object). Nothing is ever downloaded.
* ``make_batch()`` -- a fresh synthetic input batch (random images and labels, random token
  ids); the batch is data-independent work for these models, so random data times the
  same as real data.
* ``loss(model, batch)`` -- the scalar training loss of one forward pass.

Names:

* torchvision: ``resnet18``, ``resnet34``, ``resnet50``, ``resnet101``, ``resnet152``,
  ``densenet121``, ``densenet161``, ``densenet169``, ``densenet201``, ``inception_v3``
  (299x299 input, no auxiliary head), ``googlenet`` (no auxiliary heads), ``vgg11``,
  ``vgg16``, ``vgg19``, ``alexnet``, ``mobilenet_v2``, ``mobilenet_v3_large``,
  ``efficientnet_b0``, ``vit_b_16``; 224x224 images, 1000 classes, cross-entropy loss.
* transformers (needs ``transformers``): ``bert-base``, ``bert-large`` (masked-LM head,
  whose decoder weight is tied to the word embeddings), ``gpt2``, ``gpt2-medium``,
  ``gpt2-large`` (LM head tied to the token embeddings); ``seq_len`` tokens per sample
  (default 128); loss = the model's own LM loss with the inputs as labels.
* tiny models for tests and smoke runs: ``tiny-mlp``, ``tiny-cnn``.
* ``package.module:attr`` -- a user model, accepted only from a command-line option (a
  model named by a configuration file or a trace sidecar must be a zoo name:
  :func:`gradsched.names.registry_model`); the module is imported from an installed package
  or a folder on ``PYTHONPATH``, never from the working folder. ``attr`` is a callable
  ``attr(batch_size=..., seq_len=...)`` returning ``(model, make_batch)`` or
  ``(model, make_batch, loss_fn)``. ``make_batch()`` returns ``(inputs, target)``;
  ``inputs`` is a tensor or a tuple of positional tensors. Without ``loss_fn`` the loss is
  cross-entropy for an integer target, MSE for a float target, and ``output.float().mean()``
  for ``target is None``. ``loss_fn(output, target)`` overrides that.

:func:`build_model` moves model and inputs to the device and dtype (``fp32`` or ``bf16``:
parameters, activations and gradients in that type; integer inputs stay integer).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradsched.errors import ConfigError
from gradsched.names import user_import_path

DTYPES: tuple[str, ...] = ("fp32", "bf16")

TORCHVISION: dict[str, dict[str, Any]] = {
    "resnet18": {}, "resnet34": {}, "resnet50": {}, "resnet101": {}, "resnet152": {},
    "densenet121": {}, "densenet161": {}, "densenet169": {}, "densenet201": {},
    "inception_v3": {"aux_logits": False, "init_weights": True, "image": 299},
    "googlenet": {"aux_logits": False, "init_weights": True},
    "vgg11": {}, "vgg16": {}, "vgg19": {}, "alexnet": {},
    "mobilenet_v2": {}, "mobilenet_v3_large": {}, "efficientnet_b0": {}, "vit_b_16": {},
}

TRANSFORMERS: dict[str, dict[str, Any]] = {
    "bert-base": {"family": "bert", "hidden_size": 768, "num_hidden_layers": 12,
                  "num_attention_heads": 12, "intermediate_size": 3072},
    "bert-large": {"family": "bert", "hidden_size": 1024, "num_hidden_layers": 24,
                   "num_attention_heads": 16, "intermediate_size": 4096},
    "gpt2": {"family": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12},
    "gpt2-medium": {"family": "gpt2", "n_embd": 1024, "n_layer": 24, "n_head": 16},
    "gpt2-large": {"family": "gpt2", "n_embd": 1280, "n_layer": 36, "n_head": 20},
}

TINY: tuple[str, ...] = ("tiny-mlp", "tiny-cnn")


def takes_seq_len(name: str) -> bool:
    """Whether model ``name`` reads a sequence length: the transformers, and a user's
    ``package.module:attr`` (called with ``seq_len``); the vision and tiny models do not."""
    return name in TRANSFORMERS or ":" in name


def check_seq_len(name: str, seq_len: int | None) -> None:
    """Refuse a sequence length for a model that does not read one (it would be dropped
    without a word)."""
    if seq_len is not None and not takes_seq_len(name):
        raise ConfigError(f"seq_len {seq_len}: model {name!r} takes no sequence length (only "
                          f"the transformers {', '.join(TRANSFORMERS)} and package.module:attr "
                          "models do); drop --seq-len")


def model_names() -> list[str]:
    """Every built-in model name."""
    return sorted([*TORCHVISION, *TRANSFORMERS, *TINY])


@dataclass
class ModelSpec:
    """A model ready to train: the module, its input generator and its loss."""

    name: str
    model: Any  # torch.nn.Module
    make_batch: Callable[[], Any]
    loss: Callable[[Any, Any], Any]  # (model, batch) -> scalar tensor
    family: str
    seq_len: int | None = None
    notes: str = ""


def torch_dtype(dtype: str) -> Any:
    """``fp32`` / ``bf16`` -> the torch dtype."""
    import torch

    table = {"fp32": torch.float32, "bf16": torch.bfloat16}
    if dtype not in table:
        raise ConfigError(f"unknown dtype {dtype!r}; use one of: {', '.join(DTYPES)}")
    return table[dtype]


def build_model(name: str, batch_size: int, *, device: str = "cpu", dtype: str = "fp32",
                seq_len: int | None = None, seed: int = 0) -> ModelSpec:
    """Build model ``name`` (random init) with a batch generator and a loss."""
    import torch

    if batch_size < 1:
        raise ConfigError(f"batch size must be >= 1, not {batch_size}")
    tdtype = torch_dtype(dtype)
    torch.manual_seed(seed)
    if name in TORCHVISION:
        spec = _torchvision(name, batch_size)
    elif name in TRANSFORMERS:
        spec = _transformers(name, batch_size, seq_len or 128)
    elif name in TINY:
        spec = _tiny(name, batch_size)
    elif ":" in name:
        spec = _user(name, batch_size, seq_len)
    else:
        raise ConfigError(f"unknown model {name!r}; use one of: {', '.join(model_names())}, "
                          "or package.module:attr for your own")
    spec.model.to(device=device, dtype=tdtype)
    spec.model.train()
    inner = spec.make_batch
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)

    def make_batch() -> Any:
        return _to(inner(gen), device, tdtype)

    spec.make_batch = make_batch
    return spec


def _to(obj: Any, device: str, dtype: Any) -> Any:
    """Move tensors in nested tuples/dicts to ``device``; floats also to ``dtype``."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device=device, dtype=dtype if obj.is_floating_point() else obj.dtype)
    if isinstance(obj, tuple | list):
        return type(obj)(_to(o, device, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: _to(v, device, dtype) for k, v in obj.items()}
    return obj


def _ce_loss(model: Any, batch: Any) -> Any:
    import torch.nn.functional as F

    images, labels = batch
    return F.cross_entropy(model(images).float(), labels)


def _torchvision(name: str, batch_size: int) -> ModelSpec:
    import torch
    import torchvision.models as tvm

    opts = dict(TORCHVISION[name])
    side = opts.pop("image", 224)
    model = getattr(tvm, name)(weights=None, **opts)

    def make(gen: torch.Generator) -> Any:
        return (torch.randn(batch_size, 3, side, side, generator=gen),
                torch.randint(0, 1000, (batch_size,), generator=gen))

    return ModelSpec(name, model, make, _ce_loss, "torchvision",
                     notes=f"torchvision.models.{name}(weights=None); {side}x{side} images, "
                           "1000 classes, cross-entropy")


def _transformers(name: str, batch_size: int, seq_len: int) -> ModelSpec:
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(f"model {name!r} needs the transformers package") from exc
    opts = dict(TRANSFORMERS[name])
    family = opts.pop("family")
    if family == "bert":
        config = transformers.BertConfig(max_position_embeddings=max(512, seq_len), **opts)
        model = transformers.BertForMaskedLM(config)
    else:
        config = transformers.GPT2Config(n_positions=max(1024, seq_len), **opts)
        model = transformers.GPT2LMHeadModel(config)
    vocab = int(config.vocab_size)

    def make(gen: torch.Generator) -> Any:
        ids = torch.randint(0, vocab, (batch_size, seq_len), generator=gen)
        return (ids,)

    def loss(model: Any, batch: Any) -> Any:
        (ids,) = batch
        return model(input_ids=ids, labels=ids).loss

    return ModelSpec(name, model, make, loss, "transformers", seq_len=seq_len,
                     notes=f"transformers {type(model).__name__} from {type(config).__name__}"
                           f"({opts}), random init; {seq_len} tokens per sample; LM loss "
                           "with the inputs as labels; output embedding tied to the input "
                           "embedding")


def _tiny(name: str, batch_size: int) -> ModelSpec:
    import torch
    from torch import nn

    if name == "tiny-mlp":
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                              nn.Linear(128, 10))

        def make(gen: torch.Generator) -> Any:
            return (torch.randn(batch_size, 64, generator=gen),
                    torch.randint(0, 10, (batch_size,), generator=gen))
    else:
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(32, 10))

        def make(gen: torch.Generator) -> Any:
            return (torch.randn(batch_size, 3, 32, 32, generator=gen),
                    torch.randint(0, 10, (batch_size,), generator=gen))

    return ModelSpec(name, model, make, _ce_loss, "tiny",
                     notes="a tiny sequential model for tests and smoke runs")


def load_user_factory(name: str) -> Callable[..., Any]:
    """The factory of user model ``package.module:attr``, imported without the working
    folder on the import path (:func:`gradsched.names.user_import_path`)."""
    module_name, _, attr = name.partition(":")
    if not attr.isidentifier() or not all(p.isidentifier() for p in module_name.split(".")):
        raise ConfigError(f"model {name!r}: a user model is package.module:attr (dotted "
                          "identifiers)")
    saved = sys.path[:]
    sys.path[:] = user_import_path()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot load model {name!r}: {exc} (the working folder is never "
                          "searched: install the module, or put its folder on PYTHONPATH)"
                          ) from exc
    finally:
        sys.path[:] = saved
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"cannot load model {name!r}: module {module_name!r} has no "
                          f"callable {attr!r}")
    return factory


def _user(name: str, batch_size: int, seq_len: int | None) -> ModelSpec:
    import torch.nn.functional as F

    factory = load_user_factory(name)
    kwargs: dict[str, Any] = {"batch_size": batch_size}
    if seq_len is not None:
        kwargs["seq_len"] = seq_len
    built = factory(**kwargs)
    if not isinstance(built, tuple) or len(built) not in (2, 3):
        raise ConfigError(f"{name} must return (model, make_batch) or "
                          "(model, make_batch, loss_fn)")
    model, user_batch = built[0], built[1]
    loss_fn = built[2] if len(built) == 3 else None

    def make(gen: Any) -> Any:
        return user_batch()

    def loss(model: Any, batch: Any) -> Any:
        inputs, target = batch
        args = inputs if isinstance(inputs, tuple | list) else (inputs,)
        out = model(*args)
        if loss_fn is not None:
            return loss_fn(out, target)
        if target is None:
            return out.float().mean()
        if target.is_floating_point():
            return F.mse_loss(out.float(), target.float())
        return F.cross_entropy(out.float(), target)

    return ModelSpec(name, model, make, loss, "user", seq_len=seq_len,
                     notes=f"user model {name}")
