"""Activation memory of one decoder layer, and of the whole model's micro-batch, under no,
selective or full recomputation (activation checkpointing).

The accounting is Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models" (MLSys 2023), Section 4: every operation keeps the inputs its backward
needs until the backward runs, so a layer's activation memory is the sum of those saved
tensors. For their GPT layer at 16-bit, with dropout masks of one byte and no tensor or
sequence parallelism (their eq. 1):

    activations per layer = s b h (34 + 5 a s / h)     bytes

(``s`` sequence, ``b`` micro-batch, ``h`` hidden, ``a`` heads): attention 11 sbh + 5 as^2 b
(QKV input 2, Q and K 4, V 2, output projection input 2, dropout mask 1; softmax output 2,
its dropout mask 1 and output 2 per as^2 b), MLP 19 sbh (input 2, GeLU input 8, GeLU output
8, dropout mask 1), two LayerNorms 4 sbh. **Selective recomputation** (their Section 5)
recomputes the attention core (QK^T, softmax, dropout, attention over V) in the backward and
keeps ``34 sbh`` -- what FlashAttention keeps too (Dao et al. 2022, Section 3.1: the scores
are recomputed, only the softmax statistics kept). **Full recomputation** (their Section 4.3)
keeps each layer's input, ``2 sbh``, and rebuilds one layer's activations at a time in the
backward: that layer's ``s b h (34 + 5 a s / h)`` is live on top.

The **Llama layout** (RMSNorm, grouped-query attention, SwiGLU, no dropout) is the same
accounting applied to the operations of transformers' ``modeling_llama.py``
(``LlamaRMSNorm`` unfused: it keeps its input and the normalised input, 2 sbh elements;
q/k/v input 1; query 1, the key and value repeated to all heads 1 + 1 (``repeat_kv``);
softmax output a s^2 b; output projection input 1; SwiGLU input 1, gate output, its SiLU
output and the up projection 3 x s b f, down-projection input s b f), in elements of the
activation type ``e`` bytes:

    llama layer = e s b (10 h + 4 f) + e a s^2 b

Selective recomputation recomputes the scores and the repeated key and value (the region
starts at the attention core's inputs, whose key and value have the ``h_kv`` key/value
width): it keeps ``e s b (8 h + 2 h_kv + 4 f)``.

A routed MoE FFN holds its SwiGLU activations for the ``k`` experts each token visits
(balanced routing) plus the shared experts'; multi-head latent attention is priced as
attention with its query/key and value head dims (an approximation, not validated). The
output head keeps the final norm's input and its own (3 e s b h), the logits (e s b V) and
the fp32 log-softmax of the cross-entropy (4 s b V; Korthikanti Section 4.3 counts the same
4 sbv); the backward starts with the gradients of both, ``(e + 4) s b V`` more.

**The peak** is the stored activations plus the larger of two transients of the backward:
the head's gradients, and the one layer rebuilt by recomputation (full: the layer's whole
activations less its kept input; selective: its scores and repeated key/value).

Validated on CPU runs of small Llama decoders from transformers against the CPU allocator's
measured total (``tests/traces/test_activations_measured.py``); a modelled count, not a
measurement, for every shape it is asked about.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.errors import ConfigError
from gradsched.llm_shapes import LlmShape

CHECKPOINTING = ("none", "selective", "full")
"""None, selective (attention core recomputed) or full (per layer) recomputation."""


@dataclass(frozen=True)
class LayerActivations:
    """Bytes one decoder layer keeps for its backward: the parts of the formula."""

    linear_bytes: float  # terms in s b h and s b f (kept under selective recomputation)
    scores_bytes: float  # terms in a s^2 b (recomputed under selective)
    input_bytes: float  # the layer's input (all that full recomputation keeps)

    @property
    def none_bytes(self) -> float:
        return self.linear_bytes + self.scores_bytes

    def stored(self, mode: str) -> float:
        return {"none": self.none_bytes, "selective": self.linear_bytes,
                "full": self.input_bytes}[mode]

    def recompute_peak(self, mode: str) -> float:
        """What is rebuilt on top of the stored activations while one layer's backward
        runs: the attention scores (selective) or the whole layer (full)."""
        return {"none": 0.0, "selective": self.scores_bytes,
                "full": self.none_bytes - self.input_bytes}[mode]


def layer_activations(shape: LlmShape, index: int, tokens: int, seq_len: int,
                      element_bytes: int) -> LayerActivations:
    """Layer ``index``'s activation bytes for ``tokens`` = micro-batch x ``seq_len``
    tokens (module docstring)."""
    e, t, h = float(element_bytes), float(tokens), float(shape.hidden)
    scores = t * seq_len * shape.heads  # a s^2 b elements
    if shape.kind == "gpt":  # Korthikanti eq. 1, 16-bit terms scaled to e bytes, masks 1 byte
        return LayerActivations(linear_bytes=t * h * (16 * e + 2),
                                scores_bytes=scores * (2 * e + 1), input_bytes=e * t * h)
    ffn = _ffn_elements(shape, index, t)
    if shape.kind == "neox":  # not validated: Korthikanti's terms without dropout
        # norms 2, qkv input 1, q k v 3, output projection input 1, MLP input 1 (x s b h);
        # GeLU input and output (2 x s b f)
        return LayerActivations(e * (8 * t * h + 2 * t * shape.ffn), e * scores, e * t * h)
    kv = float(shape.kv_heads * shape.head_dim)
    # norm 2, q/k/v input 1, query 1, key and value 2 kv / h, o_proj input 1 (x s b h)
    attention = t * (5.0 * h + 2.0 * kv)
    repeated = 2.0 * t * (shape.heads * shape.head_dim - kv)  # repeat_kv's copies (GQA)
    if shape.latent is not None:
        la = shape.latent
        per_head = 2 * (la.nope_head_dim + la.rope_head_dim) + la.v_head_dim
        attention, repeated = t * (4 * h + la.q_rank + la.kv_rank + shape.heads * per_head), 0.0
    return LayerActivations(linear_bytes=e * (attention + 3 * t * h + ffn),
                            scores_bytes=e * (scores + repeated), input_bytes=e * t * h)


def _ffn_elements(shape: LlmShape, index: int, tokens: float) -> float:
    """SwiGLU's kept elements (4 per FFN unit per token): the dense FFN, or the ``k``
    routed experts and the shared ones a token visits."""
    m = shape.moe
    if m is None or index < m.first_dense_layers:
        return 4.0 * tokens * shape.ffn
    return 4.0 * tokens * m.expert_ffn * (m.top_k + m.shared_experts)


def head_bytes(shape: LlmShape, tokens: int, element_bytes: int) -> float:
    """The final norm and the head: 3 e s b h, the logits e s b V and the fp32 log-softmax
    4 s b V (module docstring)."""
    return float(tokens) * (3.0 * element_bytes * shape.hidden
                            + (element_bytes + 4.0) * shape.vocab)


def head_gradient_bytes(shape: LlmShape, tokens: int, element_bytes: int) -> float:
    """The first transient of the backward: the gradients of the fp32 log-softmax and of
    the logits, ``(e + 4) s b V``."""
    return float(tokens) * (element_bytes + 4.0) * shape.vocab


@dataclass(frozen=True)
class ActivationMemory:
    """The activation memory of one micro-batch under one checkpointing mode (bytes)."""

    mode: str
    per_layer_bytes: tuple[float, ...]
    recompute_peak_bytes: float
    head_bytes: float
    head_gradient_bytes: float = 0.0

    @property
    def stored_bytes(self) -> float:
        return sum(self.per_layer_bytes) + self.head_bytes

    @property
    def peak_bytes(self) -> float:
        """Stored activations plus the larger backward transient (module docstring)."""
        return self.stored_bytes + max(self.recompute_peak_bytes, self.head_gradient_bytes)


def activation_memory(shape: LlmShape, micro_batch: int, seq_len: int, element_bytes: int,
                      mode: str) -> ActivationMemory:
    """Every layer's kept bytes, the head's, and the recomputed layer's (module docstring)."""
    if mode not in CHECKPOINTING:
        raise ConfigError(f"checkpointing must be one of {', '.join(CHECKPOINTING)}, not "
                          f"{mode!r}")
    tokens = micro_batch * seq_len
    layers = [layer_activations(shape, i, tokens, seq_len, element_bytes)
              for i in range(shape.layers)]
    return ActivationMemory(mode=mode, per_layer_bytes=tuple(la.stored(mode) for la in layers),
                            recompute_peak_bytes=max(la.recompute_peak(mode) for la in layers),
                            head_bytes=head_bytes(shape, tokens, element_bytes),
                            head_gradient_bytes=head_gradient_bytes(shape, tokens,
                                                                    element_bytes))
