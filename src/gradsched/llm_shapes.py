"""Large-language-model shapes from public configurations, without torch: the parameter
tensors data-parallel training communicates, in forward order (:func:`parameter_list`), with
what the FLOPs model of :mod:`gradsched.traces.flops` needs to price each one. The same
shapes are built on PyTorch's meta device by :mod:`gradsched.workloads.llm`.

**One route: ``config.json`` -> :class:`LlmShape`** (:func:`shape_from_config`). Every named
shape is read from a Hugging Face configuration committed under
``data/external/hf-configs/NAME/config.json`` with its card (``cards.json``: published
parameter count, pre-training sequence, licence); any other ``config.json`` of a supported
``model_type`` (llama, mistral, qwen2, mixtral, gpt_neox, gpt2, deepseek_v3) is read the same
way (:func:`hf_config_shape`). Committed: Llama 3.1 8B / 70B / 405B, Llama 2 70B, Mixtral
8x7B, Qwen2.5 72B, GPT-NeoX-20B, GPT-3 175B and DeepSeek-V3. The three shapes this module
held before as tables read, from their configurations:

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

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gradsched.errors import ConfigError
from gradsched.io import read_json


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
    kind: str  # "llama" | "mixtral" | "neox" | "gpt" | "deepseek"
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
    qkv_bias: bool = False
    tied: bool = False  # the head is the token embedding (gpt: always)
    head_dim_override: int | None = None  # a config's head_dim, when not hidden / heads
    train_seq_len: int | None = None  # the pre-training sequence; None: max_positions

    @property
    def head_dim(self) -> int:
        return self.head_dim_override or self.hidden // self.heads

    @property
    def default_seq_len(self) -> int:
        return self.train_seq_len or self.max_positions


HF_CONFIG_DIR = Path(__file__).resolve().parent / "hf_configs"
"""The committed public configurations (``NAME/config.json``) and ``cards.json`` (published
parameter count, pre-training sequence, licence, source per name): see its README. Package
data, so an installed gradsched has them; ``data/external/hf-configs`` links here."""

KIND_BY_MODEL_TYPE = {"llama": "llama", "mistral": "llama", "qwen2": "llama",
                      "mixtral": "mixtral", "gpt_neox": "neox", "gpt2": "gpt",
                      "deepseek_v3": "deepseek"}
"""Hugging Face ``model_type`` -> the module layout of :func:`parameter_list`."""


def _field(config: dict, where: str, *keys: str, default: object = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    if default is None:
        raise ConfigError(f"{where}: config.json has no {' / '.join(keys)}")
    return default


def _positive(config: dict, where: str, *keys: str, default: int | None = None) -> int:
    value = _field(config, where, *keys, default=default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: config.json field {keys[0]} must be a non-negative "
                          f"integer, got {value!r}")
    return value


def shape_from_config(config: dict, name: str, *, published_params: float = 0.0,
                      source: str = "", train_seq_len: int | None = None) -> LlmShape:
    """The :class:`LlmShape` of a Hugging Face ``config.json`` (a decoder-only causal LM of
    ``model_type`` llama, mistral, qwen2, mixtral, gpt_neox, gpt2 or deepseek_v3). The fields
    read are those the transformers classes of the same ``model_type`` build their
    parameters from (``transformers/models/<type>/configuration_<type>.py``): sizes, heads,
    key/value heads, ``head_dim``, vocabulary, tying, experts; Qwen2 has biases on its
    query/key/value projections (``modeling_qwen2.py``, ``Qwen2Attention``)."""
    where = f"model {name}"
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: config.json must hold a JSON object")
    model_type = config.get("model_type")
    if model_type not in KIND_BY_MODEL_TYPE:
        raise ConfigError(f"{where}: model_type {model_type!r} is not supported; use one of: "
                          f"{', '.join(sorted(KIND_BY_MODEL_TYPE))}")
    kind = KIND_BY_MODEL_TYPE[model_type]
    hidden = _positive(config, where, "hidden_size", "n_embd")
    heads = _positive(config, where, "num_attention_heads", "n_head")
    if heads == 0 or (hidden % heads and config.get("head_dim") is None):
        raise ConfigError(f"{where}: hidden_size {hidden} is not a multiple of "
                          f"num_attention_heads {heads} and no head_dim is given")
    kv_heads = _positive(config, where, "num_key_value_heads", default=heads)
    if kv_heads == 0 or heads % kv_heads:
        raise ConfigError(f"{where}: num_attention_heads {heads} is not a multiple of "
                          f"num_key_value_heads {kv_heads}")
    positions = _positive(config, where, "max_position_embeddings", "n_positions")
    shape = LlmShape(
        name=name, kind=kind, layers=_positive(config, where, "num_hidden_layers", "n_layer"),
        hidden=hidden, ffn=_positive(config, where, "intermediate_size", "n_inner",
                                     default=4 * hidden),
        heads=heads, kv_heads=kv_heads, vocab=_positive(config, where, "vocab_size"),
        max_positions=positions, published_params=float(published_params),
        source=source or f"config.json of {name}",
        qkv_bias=bool(model_type == "qwen2" or config.get("attention_bias", False)),
        tied=bool(config.get("tie_word_embeddings", kind == "gpt")),
        head_dim_override=config.get("head_dim"), train_seq_len=train_seq_len)
    if kind == "mixtral":
        shape = replace(shape, moe=Moe(
            first_dense_layers=0, routed_experts=_positive(config, where, "num_local_experts"),
            top_k=_positive(config, where, "num_experts_per_tok"), shared_experts=0,
            expert_ffn=shape.ffn))
    if kind == "deepseek":
        shape = replace(shape, moe=Moe(
            first_dense_layers=_positive(config, where, "first_k_dense_replace"),
            routed_experts=_positive(config, where, "n_routed_experts"),
            top_k=_positive(config, where, "num_experts_per_tok"),
            shared_experts=_positive(config, where, "n_shared_experts"),
            expert_ffn=_positive(config, where, "moe_intermediate_size")),
            latent=LatentAttention(
                q_rank=_positive(config, where, "q_lora_rank"),
                kv_rank=_positive(config, where, "kv_lora_rank"),
                nope_head_dim=_positive(config, where, "qk_nope_head_dim"),
                rope_head_dim=_positive(config, where, "qk_rope_head_dim"),
                v_head_dim=_positive(config, where, "v_head_dim")))
    if kind == "gpt" and not shape.tied:
        raise ConfigError(f"{where}: a gpt2 layout here has its head tied to the embeddings")
    return shape


def read_config(path: Path) -> dict:
    """A ``config.json`` as a dict; a clear error naming the file otherwise."""
    return read_json(path, "no such config.json")


def _committed_shapes() -> dict[str, LlmShape]:
    """Every committed configuration of :data:`HF_CONFIG_DIR`, with its card's numbers."""
    cards = read_config(HF_CONFIG_DIR / "cards.json")
    out = {}
    for name in sorted(cards):
        card = cards[name]
        config = read_config(HF_CONFIG_DIR / name / "config.json")
        source = (f"config.json of {card['hub'] or name} (architecture fields, "
                  f"data/external/hf-configs/{name}); parameters: {card['card']}")
        out[name] = shape_from_config(config, name, published_params=card["published_params"],
                                      source=source, train_seq_len=card["train_seq_len"])
    return out


def hf_config_shape(spec: str) -> LlmShape:
    """``spec``: the name of a committed configuration, or the path of a ``config.json``
    (or of a folder holding one)."""
    if spec in LLM_SHAPES:
        return LLM_SHAPES[spec]
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if not path.exists():
        raise ConfigError(f"--hf-config {spec!r}: neither a committed configuration "
                          f"({', '.join(llm_names())}) nor an existing config.json")
    return shape_from_config(read_config(path), path.parent.name or path.stem,
                             source=f"config.json at {path}")


LLM_SHAPES: dict[str, LlmShape] = _committed_shapes()
"""Every published shape, read from its configuration (:data:`HF_CONFIG_DIR`): one route
from ``config.json`` to the parameter list, the meta-device model and the FLOPs trace."""


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
    if s.kind == "neox":
        return _neox_parameters(s)
    out = [("model.embed_tokens.weight", s.vocab * s.hidden)]
    for i in range(s.layers):
        out += _decoder_layer_parameters(s, i, f"model.layers.{i}")
    out.append(("model.norm.weight", s.hidden))
    return out + ([] if s.tied else [("lm_head.weight", s.vocab * s.hidden)])


def _linear(prefix: str, n_in: int, n_out: int, bias: bool = False) -> list[tuple[str, int]]:
    return [(f"{prefix}.weight", n_in * n_out)] + ([(f"{prefix}.bias", n_out)] if bias else [])


def _swiglu(prefix: str, hidden: int, ffn: int) -> list[tuple[str, int]]:
    return (_linear(f"{prefix}.gate_proj", hidden, ffn) + _linear(f"{prefix}.up_proj", hidden, ffn)
            + _linear(f"{prefix}.down_proj", ffn, hidden))


def _attention_parameters(s: LlmShape, prefix: str) -> list[tuple[str, int]]:
    if s.latent is None:
        q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
        return (_linear(f"{prefix}.q_proj", s.hidden, q, s.qkv_bias)
                + _linear(f"{prefix}.k_proj", s.hidden, kv, s.qkv_bias)
                + _linear(f"{prefix}.v_proj", s.hidden, kv, s.qkv_bias)
                + _linear(f"{prefix}.o_proj", q, s.hidden))
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
    if s.kind == "mixtral":  # the checkpoint's names: block_sparse_moe.experts.E.w1/w2/w3
        out += _linear(f"{prefix}.block_sparse_moe.gate", s.hidden, m.routed_experts)
        for e in range(m.routed_experts):
            p = f"{prefix}.block_sparse_moe.experts.{e}"
            out += (_linear(f"{p}.w1", s.hidden, m.expert_ffn)
                    + _linear(f"{p}.w2", m.expert_ffn, s.hidden)
                    + _linear(f"{p}.w3", s.hidden, m.expert_ffn))
        return out
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


def _neox_parameters(s: LlmShape) -> list[tuple[str, int]]:
    """GPT-NeoX (Black et al. 2022; transformers ``modeling_gpt_neox.py``): LayerNorms and
    projections with biases, one fused query/key/value matrix, rotary positions, an untied
    head (``embed_out``)."""
    out = [("gpt_neox.embed_in.weight", s.vocab * s.hidden)]
    for i in range(s.layers):
        p = f"gpt_neox.layers.{i}"
        out += [(f"{p}.input_layernorm.weight", s.hidden), (f"{p}.input_layernorm.bias", s.hidden)]
        out += _linear(f"{p}.attention.query_key_value", s.hidden, 3 * s.hidden, bias=True)
        out += _linear(f"{p}.attention.dense", s.hidden, s.hidden, bias=True)
        out += [(f"{p}.post_attention_layernorm.weight", s.hidden),
                (f"{p}.post_attention_layernorm.bias", s.hidden)]
        out += _linear(f"{p}.mlp.dense_h_to_4h", s.hidden, s.ffn, bias=True)
        out += _linear(f"{p}.mlp.dense_4h_to_h", s.ffn, s.hidden, bias=True)
    out += [("gpt_neox.final_layer_norm.weight", s.hidden),
            ("gpt_neox.final_layer_norm.bias", s.hidden)]
    return out + ([] if s.tied else [("embed_out.weight", s.vocab * s.hidden)])
