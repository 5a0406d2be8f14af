"""Large-language-model shapes, built on PyTorch's meta device from public configurations
(no weights, no download): the parameter tensors data-parallel training communicates, in
forward order, with what the FLOPs model of :mod:`gradsched.traces.flops` needs to price
each one. The shapes themselves (read from each model's Hugging Face ``config.json``, the
committed ones under ``data/external/hf-configs/``, and their parameter list without torch)
are common ground: :mod:`gradsched.llm_shapes`. Mixtral's experts keep the published
checkpoint's names (``block_sparse_moe.experts.E.w1/w2/w3``), one tensor each, as
DeepSeek-V3's do; transformers' own classes (which fuse the experts into one tensor) count
the same parameters (``tests/workloads/test_hf_configs.py``).

Every module is registered in the order its forward runs, so ``named_parameters()`` is the
forward order a compute trace needs.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from gradsched.llm_shapes import LlmShape, llm_shape


def build_meta_model(name: str | LlmShape) -> Any:
    """The architecture ``name`` (a committed configuration's name, or a shape read from a
    ``config.json``) on the meta device (no memory, no weights)."""
    import torch

    shape = name if isinstance(name, LlmShape) else llm_shape(name)
    with torch.device("meta"):
        return decoder_classes()[shape.kind](shape)


@cache
def decoder_classes() -> dict[str, Any]:
    """The module classes by :attr:`LlmShape.kind`, defined when torch is first needed
    (importing this file needs no torch)."""
    import torch
    from torch import nn

    def linear(n_in: int, n_out: int, bias: bool = False) -> nn.Linear:
        return nn.Linear(n_in, n_out, bias=bias)

    class RmsNorm(nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(width))

    class LlamaAttention(nn.Module):
        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
            b = s.qkv_bias
            self.q_proj, self.k_proj = linear(s.hidden, q, b), linear(s.hidden, kv, b)
            self.v_proj, self.o_proj = linear(s.hidden, kv, b), linear(q, s.hidden)

    class SwiGlu(nn.Module):
        def __init__(self, hidden: int, ffn: int) -> None:
            super().__init__()
            self.gate_proj, self.up_proj = linear(hidden, ffn), linear(hidden, ffn)
            self.down_proj = linear(ffn, hidden)

    class LatentAttentionBlock(nn.Module):
        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            la = s.latent
            qk = la.nope_head_dim + la.rope_head_dim
            self.q_a_proj = linear(s.hidden, la.q_rank)
            self.q_a_layernorm = RmsNorm(la.q_rank)
            self.q_b_proj = linear(la.q_rank, s.heads * qk)
            self.kv_a_proj_with_mqa = linear(s.hidden, la.kv_rank + la.rope_head_dim)
            self.kv_a_layernorm = RmsNorm(la.kv_rank)
            self.kv_b_proj = linear(la.kv_rank, s.heads * (la.nope_head_dim + la.v_head_dim))
            self.o_proj = linear(s.heads * la.v_head_dim, s.hidden)

    class MoeFfn(nn.Module):
        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            m = s.moe
            self.gate = linear(s.hidden, m.routed_experts)
            self.experts = nn.ModuleList(SwiGlu(s.hidden, m.expert_ffn)
                                         for _ in range(m.routed_experts))
            self.shared_experts = SwiGlu(s.hidden, m.shared_experts * m.expert_ffn)

    class DecoderLayer(nn.Module):
        def __init__(self, s: LlmShape, index: int) -> None:
            super().__init__()
            self.input_layernorm = RmsNorm(s.hidden)
            self.self_attn = (LatentAttentionBlock(s) if s.latent else LlamaAttention(s))
            self.post_attention_layernorm = RmsNorm(s.hidden)
            if s.kind == "mixtral":
                self.block_sparse_moe = mixtral_moe_class()(s)
                return
            dense = s.moe is None or index < s.moe.first_dense_layers
            self.mlp = SwiGlu(s.hidden, s.ffn) if dense else MoeFfn(s)

    class RmsDecoder(nn.Module):
        """LLaMA and DeepSeek: embeddings, layers, a final RMSNorm, an untied head."""

        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            self.model = nn.Module()
            self.model.embed_tokens = nn.Embedding(s.vocab, s.hidden)
            self.model.layers = nn.ModuleList(DecoderLayer(s, i) for i in range(s.layers))
            self.model.norm = RmsNorm(s.hidden)
            if not s.tied:
                self.lm_head = linear(s.hidden, s.vocab)

    class GptBlock(nn.Module):
        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(s.hidden)
            self.attn = nn.Module()
            self.attn.c_attn = linear(s.hidden, 3 * s.hidden, bias=True)
            self.attn.c_proj = linear(s.hidden, s.hidden, bias=True)
            self.ln_2 = nn.LayerNorm(s.hidden)
            self.mlp = nn.Module()
            self.mlp.c_fc = linear(s.hidden, s.ffn, bias=True)
            self.mlp.c_proj = linear(s.ffn, s.hidden, bias=True)

    class GptDecoder(nn.Module):
        """GPT-2/GPT-3: token and position embeddings, layers, a final LayerNorm; the head is
        the token embedding (tied), so it adds no tensor."""

        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            self.transformer = nn.Module()
            self.transformer.wte = nn.Embedding(s.vocab, s.hidden)
            self.transformer.wpe = nn.Embedding(s.max_positions, s.hidden)
            self.transformer.h = nn.ModuleList(GptBlock(s) for _ in range(s.layers))
            self.transformer.ln_f = nn.LayerNorm(s.hidden)

    return {"llama": RmsDecoder, "mixtral": RmsDecoder, "deepseek": RmsDecoder,
            "gpt": GptDecoder, "neox": neox_decoder_class()}



@cache
def mixtral_moe_class() -> Any:
    """Mixtral's sparse MoE block (router and experts ``w1``/``w2``/``w3``, the published
    checkpoint's names)."""
    from torch import nn

    class MixtralExpert(nn.Module):
        def __init__(self, hidden: int, ffn: int) -> None:
            super().__init__()
            self.w1 = nn.Linear(hidden, ffn, bias=False)
            self.w2 = nn.Linear(ffn, hidden, bias=False)
            self.w3 = nn.Linear(hidden, ffn, bias=False)

    class SparseMoe(nn.Module):
        """Mixtral's block: a router and its experts, named as in the published checkpoint."""

        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            self.gate = nn.Linear(s.hidden, s.moe.routed_experts, bias=False)
            self.experts = nn.ModuleList(MixtralExpert(s.hidden, s.moe.expert_ffn)
                                         for _ in range(s.moe.routed_experts))

    return SparseMoe


@cache
def neox_decoder_class() -> Any:
    """GPT-NeoX's decoder (transformers ``modeling_gpt_neox.py``'s parameter names)."""
    from torch import nn

    def linear(n_in: int, n_out: int, bias: bool = False) -> nn.Linear:
        return nn.Linear(n_in, n_out, bias=bias)

    class NeoxLayer(nn.Module):
        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            self.input_layernorm = nn.LayerNorm(s.hidden)
            self.attention = nn.Module()
            self.attention.query_key_value = linear(s.hidden, 3 * s.hidden, bias=True)
            self.attention.dense = linear(s.hidden, s.hidden, bias=True)
            self.post_attention_layernorm = nn.LayerNorm(s.hidden)
            self.mlp = nn.Module()
            self.mlp.dense_h_to_4h = linear(s.hidden, s.ffn, bias=True)
            self.mlp.dense_4h_to_h = linear(s.ffn, s.hidden, bias=True)

    class NeoxDecoder(nn.Module):
        """GPT-NeoX: LayerNorms with biases, a fused query/key/value matrix, an untied head."""

        def __init__(self, s: LlmShape) -> None:
            super().__init__()
            self.gpt_neox = nn.Module()
            self.gpt_neox.embed_in = nn.Embedding(s.vocab, s.hidden)
            self.gpt_neox.layers = nn.ModuleList(NeoxLayer(s) for _ in range(s.layers))
            self.gpt_neox.final_layer_norm = nn.LayerNorm(s.hidden)
            if not s.tied:
                self.embed_out = linear(s.hidden, s.vocab)

    return NeoxDecoder
