"""A Llama decoder in PyTorch whose parameter names, shapes and arithmetic are those of Hugging
Face's LlamaForCausalLM (RMSNorm in f32, rotate-half RoPE, grouped-query attention, SwiGLU, tied
embedding), so that its state dict is a Hugging Face checkpoint that `exactq convert` reads.
Dropout on the residual branches is for training only; the saved model has none."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {
    # hidden, layers, heads, kv heads, intermediate
    "target": dict(hidden_size=384, num_hidden_layers=8, num_attention_heads=6, num_key_value_heads=2,
                   intermediate_size=1024),
    "draft": dict(hidden_size=192, num_hidden_layers=4, num_attention_heads=3, num_key_value_heads=1,
                  intermediate_size=512),
}


def hf_config(size, vocab_size, max_positions):
    c = dict(SIZES[size])
    c.update(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=vocab_size, head_dim=64,
             hidden_act="silu", rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
             max_position_embeddings=max_positions, tie_word_embeddings=True, attention_bias=False,
             mlp_bias=False, bos_token_id=0, eos_token_id=1, pad_token_id=2, torch_dtype="bfloat16")
    return c


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        d = c["hidden_size"]
        self.q_proj = nn.Linear(d, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = (q * cos + rotate_half(q) * sin).to(v.dtype)
        k = (k * cos + rotate_half(k) * sin).to(v.dtype)
        repeat = self.heads // self.kv_heads
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, dropout):
        x = x + F.dropout(self.self_attn(self.input_layernorm(x), cos, sin), dropout, self.training)
        return x + F.dropout(self.mlp(self.post_attention_layernorm(x)), dropout, self.training)


class Inner(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class LlamaForCausalLM(nn.Module):
    def __init__(self, c, dropout=0.0):
        super().__init__()
        self.config, self.dropout = c, dropout
        self.model = Inner(c)
        hd = c["head_dim"]
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        angles = torch.outer(torch.arange(c["max_position_embeddings"], dtype=torch.float64), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        # N(0, 0.02), the writers into the residual stream scaled by 1/sqrt(2 layers), norms at 1.
        residual_std = 0.02 / math.sqrt(2 * self.config["num_hidden_layers"])
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                nn.init.ones_(p)
            elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                nn.init.normal_(p, std=residual_std)
            else:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids):
        t = ids.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, self.dropout)
        return F.linear(self.model.norm(x), self.model.embed_tokens.weight)  # the tied head
