"""The activation model (:mod:`gradsched.traces.activations`) against the CPU allocator, on
small Llama decoders from transformers, under no, selective and full recomputation.

**What is measured.** PyTorch's CPU allocator has no peak statistic; with
``torch.profiler.profile(profile_memory=True)`` it reports every allocation and free
(``[memory]`` events: address, bytes). Replaying them, matched by address, gives the bytes
alive at every moment of one training step (allocations made before the profile, i.e. the
parameters, are not in it). Parameter gradients are dropped as soon as they are accumulated
(a post-accumulate-grad hook), as FSDP2 frees each unsharded gradient after its
reduce-scatter; the sharded budget counts those separately. Two numbers per run:

* **stored**: bytes alive at the end of the forward (the loss computed), what the formulas of
  Korthikanti et al. 2022, Section 4 count;
* **peak**: the most bytes alive during the forward and backward.

Full recomputation is transformers' gradient checkpointing of each decoder layer
(non-reentrant); selective recomputation checkpoints the attention core (an attention
function registered with ``AttentionInterface`` that runs transformers'
``eager_attention_forward`` under ``torch.utils.checkpoint``), as Megatron's selective
recomputation does. fp32 on CPU, eager attention (the softmax stored, as in the formula).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.llm_shapes import shape_from_config
from gradsched.traces.activations import activation_memory

pytestmark = pytest.mark.slow  # six profiled CPU steps: about a minute on two cores

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

DECODERS = {  # synthetic shapes (test inputs), small enough for a CPU step in a second
    "gqa": ({"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
             "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 2000}, 2, 256),
    "mha": ({"hidden_size": 192, "intermediate_size": 512, "num_hidden_layers": 3,
             "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 3000}, 1, 384),
}
TOLERANCE = 0.10


def _selective_attention(*args: object, **kwargs: object) -> tuple[object, None]:
    from torch.utils.checkpoint import checkpoint
    from transformers.models.llama.modeling_llama import eager_attention_forward

    out, _ = checkpoint(eager_attention_forward, *args, use_reentrant=False, **kwargs)
    return out, None


def _alive_bytes(trace: Path) -> tuple[float, float]:
    """(bytes alive when the backward starts, most bytes alive) from the profiler's
    allocation events, matched by address."""
    events = json.loads(trace.read_text())["traceEvents"]
    start = next(e["ts"] for e in events if e.get("name") == "backward" and e.get("ph") == "X")
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    alive: dict[int, int] = {}
    now = peak = stored = 0
    for e in memory:
        size, addr = e["args"]["Bytes"], e["args"]["Addr"]
        if e["ts"] >= start and not stored:
            stored = now
        if size > 0:
            alive[addr] = size
            now += size
        elif addr in alive:
            now -= alive.pop(addr)
        peak = max(peak, now)
    return float(stored), float(peak)


def _measure(config: dict, batch: int, seq: int, mode: str, trace: Path) -> tuple[float, float]:
    from torch.profiler import ProfilerActivity, profile, record_function

    transformers.AttentionInterface.register("gradsched_selective", _selective_attention)
    attention = "gradsched_selective" if mode == "selective" else "eager"
    conf = transformers.AutoConfig.for_model(model_type="llama", tie_word_embeddings=False,
                                             max_position_embeddings=seq, **config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation=attention)
    model.train()
    if mode == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(0, config["vocab_size"], (batch, seq))
    model(input_ids=ids, labels=ids).loss.backward()  # warm-up: lazy buffers outside
    model.zero_grad(set_to_none=True)
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", None))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = model(input_ids=ids, labels=ids)
        with record_function("backward"):
            out.loss.backward()
    prof.export_chrome_trace(str(trace))
    return _alive_bytes(trace)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("activations")
    return {(name, mode): _measure(config, batch, seq, mode, folder / f"{name}-{mode}.json")
            for name, (config, batch, seq) in DECODERS.items()
            for mode in ("none", "selective", "full")}


@pytest.mark.parametrize("mode", ["none", "selective", "full"])
@pytest.mark.parametrize("name", sorted(DECODERS))
def test_the_activation_model_is_within_10_percent_of_the_allocator(
        measured: dict, name: str, mode: str) -> None:
    config, batch, seq = DECODERS[name]
    shape = shape_from_config({"model_type": "llama", "max_position_embeddings": seq,
                               **config}, name)
    model = activation_memory(shape, batch, seq, 4, mode)
    stored, peak = measured[(name, mode)]
    assert model.stored_bytes == pytest.approx(stored, rel=TOLERANCE)
    assert model.peak_bytes == pytest.approx(peak, rel=TOLERANCE)


def test_recomputation_is_what_frees_the_memory(measured: dict) -> None:
    """The measured ordering (a check that the modes ran as named)."""
    for name in DECODERS:
        none, selective, full = (measured[(name, m)][0] for m in ("none", "selective", "full"))
        assert none > selective > full
