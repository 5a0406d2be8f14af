"""Large-language-model shapes from public configurations, without torch: the parameter
tensors data-parallel training communicates, in forward order (:func:`parameter_list`), with
what the FLOPs model of :mod:`gradsched.traces.flops` needs to price each one. The same
shapes are built on PyTorch's meta device by :mod:`gradsched.workloads.llm`.

Shapes (published values, cited per entry in :data:`LLM_SHAPES`):

* ``llama-2-70b`` -- Touvron et al., "Llama 2" (2023), and the ``config.json`` of
  ``meta-llama/Llama-2-70b-hf``: 80 decoder layers, hidden 8192, SwiGLU FFN 28672, 64 query
  heads and 8 key/value heads (grouped-query attention), vocabulary 32000, RMSNorm, no
  biases, untied input and output embeddings. 723 tensors, 6.898e10 parameters.
* ``gpt3-175b`` -- Brown et al., "Language Models are Few-Shot Learners" (2020), Table 2.1:
  96 layers, d_model 12288, 96 heads, context 2048, the GPT-2 architecture (learned positions,
  LayerNorm with biases, a 4 x d_model FFN, the output head tied to the token embeddings) and
  its 50257-token vocabulary. 1156 tensors, 1.7459e11 parameters.
* ``deepseek-v3`` -- DeepSeek-AI, "DeepSeek-V3 Technical Report" (2024), and the
  ``config.json`` of ``deepseek-ai/DeepSeek-V3``: 61 layers, hidden 7168, the first 3 with a
  dense FFN of 18432, the other 58 with a mixture of experts (256 routed experts of FFN 2048,
  8 routed per token, plus 1 shared expert), multi-head latent attention (128 heads, query
  rank 1536, key/value rank 512, head dims 128 + 64 rotary, value 128), vocabulary 129280,
  untied embeddings. Each expert's three matrices are separate tensors, as in the reference
  implementation; the multi-token-prediction module (14e9 parameters, used in pre-training
  only) is left out. 45 337 tensors, 6.71e11 parameters.

Common ground (``docs/architecture.md``): the published-shape data that the model zoo, the
FLOPs model and the at-scale study all read, as :mod:`gradsched.gpus` holds the GPUs'
published peaks.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.errors import ConfigError


@dataclass(frozen=True)
class Moe:
    """A mixture-of-experts FFN: routed experts (``top_k`` of them per token) and shared ones."""

    first_dense_layers: int
    routed_experts: int
    top_k: int
    shared_experts: int
    expert_ffn: int


@dataclass(frozen=True)
class LatentAttention:
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank query and key/value projections."""

    q_rank: int
    kv_rank: int
    nope_head_dim: int
    rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class LlmShape:
    """One published decoder-only architecture; ``kind`` picks the module layout."""

    name: str
    kind: str  # "llama" | "gpt" | "deepseek"
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    max_positions: int
    published_params: float
    source: str
    moe: Moe | None = None
    latent: LatentAttention | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


LLM_SHAPES: dict[str, LlmShape] = {
    "llama-2-70b": LlmShape(
        "llama-2-70b", "llama", layers=80, hidden=8192, ffn=28672, heads=64, kv_heads=8,
        vocab=32000, max_positions=4096, published_params=70e9,
        source="Touvron et al. 2023 (Llama 2), Table 1; config.json of "
               "huggingface.co/meta-llama/Llama-2-70b-hf"),
    "gpt3-175b": LlmShape(
        "gpt3-175b", "gpt", layers=96, hidden=12288, ffn=4 * 12288, heads=96, kv_heads=96,
        vocab=50257, max_positions=2048, published_params=175e9,
        source="Brown et al. 2020 (Language Models are Few-Shot Learners), Table 2.1; "
               "GPT-2's vocabulary and layout (Radford et al. 2019)"),
    "deepseek-v3": LlmShape(
        "deepseek-v3", "deepseek", layers=61, hidden=7168, ffn=18432, heads=128, kv_heads=128,
        vocab=129280, max_positions=4096, published_params=671e9,
        source="DeepSeek-AI 2024 (DeepSeek-V3 Technical Report), Section 4.2; config.json of "
               "huggingface.co/deepseek-ai/DeepSeek-V3",
        moe=Moe(first_dense_layers=3, routed_experts=256, top_k=8, shared_experts=1,
                expert_ffn=2048),
        latent=LatentAttention(q_rank=1536, kv_rank=512, nope_head_dim=128, rope_head_dim=64,
                               v_head_dim=128)),
}


def llm_names() -> list[str]:
    return sorted(LLM_SHAPES)


def llm_shape(name: str) -> LlmShape:
    if name not in LLM_SHAPES:
        raise ConfigError(f"unknown LLM shape {name!r}; use one of: {', '.join(llm_names())}")
    return LLM_SHAPES[name]


def parameter_list(name: str | LlmShape) -> list[tuple[str, int]]:
    """``(name, numel)`` of every parameter of the model that
    :func:`gradsched.workloads.llm.build_meta_model` builds, in registration order, without
    torch (the trace builders' input; a test checks it against the meta-device model's
    ``named_parameters()``). ``name`` is a key of
    :data:`LLM_SHAPES` or an :class:`LlmShape` built elsewhere (a dense decoder of kind
    ``gpt`` or ``llama`` given by its published dimensions)."""
    s = name if isinstance(name, LlmShape) else llm_shape(name)
    if s.kind == "gpt":
        return _gpt_parameters(s)
    out = [("model.embed_tokens.weight", s.vocab * s.hidden)]
    for i in range(s.layers):
        out += _decoder_layer_parameters(s, i, f"model.layers.{i}")
    out += [("model.norm.weight", s.hidden), ("lm_head.weight", s.vocab * s.hidden)]
    return out


def _linear(prefix: str, n_in: int, n_out: int, bias: bool = False) -> list[tuple[str, int]]:
    return [(f"{prefix}.weight", n_in * n_out)] + ([(f"{prefix}.bias", n_out)] if bias else [])


def _swiglu(prefix: str, hidden: int, ffn: int) -> list[tuple[str, int]]:
    return (_linear(f"{prefix}.gate_proj", hidden, ffn) + _linear(f"{prefix}.up_proj", hidden, ffn)
            + _linear(f"{prefix}.down_proj", ffn, hidden))


def _attention_parameters(s: LlmShape, prefix: str) -> list[tuple[str, int]]:
    if s.latent is None:
        kv = s.kv_heads * s.head_dim
        return (_linear(f"{prefix}.q_proj", s.hidden, s.hidden)
                + _linear(f"{prefix}.k_proj", s.hidden, kv)
                + _linear(f"{prefix}.v_proj", s.hidden, kv)
                + _linear(f"{prefix}.o_proj", s.hidden, s.hidden))
    la = s.latent
    qk = la.nope_head_dim + la.rope_head_dim
    out = _linear(f"{prefix}.q_a_proj", s.hidden, la.q_rank)
    out.append((f"{prefix}.q_a_layernorm.weight", la.q_rank))
    out += _linear(f"{prefix}.q_b_proj", la.q_rank, s.heads * qk)
    out += _linear(f"{prefix}.kv_a_proj_with_mqa", s.hidden, la.kv_rank + la.rope_head_dim)
    out.append((f"{prefix}.kv_a_layernorm.weight", la.kv_rank))
    out += _linear(f"{prefix}.kv_b_proj", la.kv_rank, s.heads * (la.nope_head_dim + la.v_head_dim))
    out += _linear(f"{prefix}.o_proj", s.heads * la.v_head_dim, s.hidden)
    return out


def _decoder_layer_parameters(s: LlmShape, index: int, prefix: str) -> list[tuple[str, int]]:
    out = [(f"{prefix}.input_layernorm.weight", s.hidden)]
    out += _attention_parameters(s, f"{prefix}.self_attn")
    out += [(f"{prefix}.post_attention_layernorm.weight", s.hidden)]
    m = s.moe
    if m is None or index < m.first_dense_layers:
        return out + _swiglu(f"{prefix}.mlp", s.hidden, s.ffn)
    out += _linear(f"{prefix}.mlp.gate", s.hidden, m.routed_experts)
    for e in range(m.routed_experts):
        out += _swiglu(f"{prefix}.mlp.experts.{e}", s.hidden, m.expert_ffn)
    return out + _swiglu(f"{prefix}.mlp.shared_experts", s.hidden, m.shared_experts * m.expert_ffn)


def _gpt_parameters(s: LlmShape) -> list[tuple[str, int]]:
    out = [("transformer.wte.weight", s.vocab * s.hidden),
           ("transformer.wpe.weight", s.max_positions * s.hidden)]
    for i in range(s.layers):
        p = f"transformer.h.{i}"
        out += [(f"{p}.ln_1.weight", s.hidden), (f"{p}.ln_1.bias", s.hidden)]
        out += _linear(f"{p}.attn.c_attn", s.hidden, 3 * s.hidden, bias=True)
        out += _linear(f"{p}.attn.c_proj", s.hidden, s.hidden, bias=True)
        out += [(f"{p}.ln_2.weight", s.hidden), (f"{p}.ln_2.bias", s.hidden)]
        out += _linear(f"{p}.mlp.c_fc", s.hidden, s.ffn, bias=True)
        out += _linear(f"{p}.mlp.c_proj", s.ffn, s.hidden, bias=True)
    out += [("transformer.ln_f.weight", s.hidden), ("transformer.ln_f.bias", s.hidden)]
    return out
