"""An MLX checkpoint directory (the layout `exactq make-model` and `exactq convert` write, and
mlx-community publishes) loaded into Hugging Face transformers in bf16: every quantized tensor
(`.weight` packed in uint32 words, `.scales`, `.biases`) dequantized on the GPU as
w = scale * q + bias per group, everything else taken as stored. The anchors (anchors_decode.py,
anchors_spec.py) run these models beside exactq's on the same GPU: it is the checkpoint a
user would otherwise run through transformers, at the precision transformers runs it.

Supported: the architectures transformers has for the checkpoint's model_type (Llama, Qwen, Gemma 3
text), affine quantization at 2, 4 or 8 bits (the widths that divide a 32-bit word)."""
import glob
import json
import os
import time


def _fail(message):
    raise SystemExit(f"hf_checkpoint: {message}")


def runtime(tool):
    """(torch, transformers) where both are installed and a GPU is usable; otherwise None, after
    saying why (an anchor then has nothing to measure and exits 0)."""
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"{tool}: {e.name} is not installed here; nothing to measure")
        return None
    if not torch.cuda.is_available():
        print(f"{tool}: no CUDA device; nothing to measure")
        return None
    return torch, transformers


def read_config(directory):
    path = os.path.join(directory, "config.json")
    if not os.path.exists(path):
        _fail(f"{path} does not exist")
    with open(path) as f:
        return json.load(f)


def _dequantize(torch, packed, scales, biases, bits, group):
    """packed: [..., K * bits / 32] uint32 words, element i of a row at bits [i*bits, (i+1)*bits) of
    the row's little-endian bit string; scales and biases: [..., K / group]."""
    if bits not in (2, 4, 8):
        _fail(f"bits = {bits} is not supported here (2, 4 or 8)")
    per_word = 32 // bits
    if packed.shape[-1] * per_word != scales.shape[-1] * group:
        _fail(f"a tensor of {packed.shape[-1]} words per row and {scales.shape[-1]} groups does not fit "
              f"{bits} bits, group {group} (per-layer quantization is not supported here)")
    words = packed.view(torch.int32).to(torch.int64)
    shifts = torch.arange(0, 32, bits, device=words.device, dtype=torch.int64)
    q = (words.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    k = packed.shape[-1] * per_word
    q = q.reshape(*packed.shape[:-1], k // group, group).to(torch.float32)
    w = q * scales.to(torch.float32).unsqueeze(-1) + biases.to(torch.float32).unsqueeze(-1)
    return w.reshape(*packed.shape[:-1], k).to(torch.bfloat16)


def load_state_dict(directory, device="cuda"):
    """The checkpoint's tensors under Hugging Face's names, dequantized, bf16, on `device`."""
    import torch
    from safetensors.torch import load_file

    config = read_config(directory)
    quant = config.get("quantization") or config.get("quantization_config") or {}
    bits, group = int(quant.get("bits", 4)), int(quant.get("group_size", 64))
    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if not files:
        _fail(f"no .safetensors files in {directory}")
    raw = {}
    for f in files:
        raw.update(load_file(f, device=device))
    state = {}
    for name in [n for n in raw if not (n.endswith(".scales") or n.endswith(".biases"))]:
        tensor = raw.pop(name)  # each packed tensor freed once dequantized
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        if base is not None and base + ".scales" in raw:
            tensor = _dequantize(torch, tensor, raw.pop(base + ".scales"), raw.pop(base + ".biases"), bits, group)
        elif tensor.is_floating_point():
            tensor = tensor.to(torch.bfloat16)
        if name.startswith("language_model."):  # Gemma 3's text model inside the multimodal layout
            name = name[len("language_model."):]
        state[name] = tensor
    del raw
    return config, state


def hf_config(config):
    """The transformers config of the checkpoint's text model, without the quantization keys."""
    from transformers import AutoConfig

    c = dict(config.get("text_config", config))
    for key in ("quantization", "quantization_config", "architectures", "auto_map"):
        c.pop(key, None)
    model_type = c.pop("model_type", config.get("model_type"))
    if model_type == "gemma3":
        model_type = "gemma3_text"
    c.pop("torch_dtype", None)
    c["dtype"] = "bfloat16"
    return AutoConfig.for_model(model_type, **c)


def load_model(directory, device="cuda"):
    """(model, seconds): the checkpoint as a transformers causal LM in bf16 on `device`, eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    config, state = load_state_dict(directory, device)
    cfg = hf_config(config)
    with torch.device(device):
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        except TypeError:  # transformers before `dtype` replaced `torch_dtype`
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = getattr(cfg, "tie_word_embeddings", False)
    missing = [m for m in missing if not (tied and m == "lm_head.weight")]
    if missing or unexpected:
        _fail(f"{directory}: tensors missing {missing[:5]} ({len(missing)}), unexpected {unexpected[:5]} ({len(unexpected)})")
    if tied:
        model.tie_weights()
    model.eval()
    del state
    torch.cuda.synchronize()
    return model, time.perf_counter() - start


def greedy_generation_kwargs(model, new_tokens):
    """generate() arguments for exactly `new_tokens` greedy tokens (no early stop at EOS), so the
    timed work is the same on every prompt and in every arm."""
    return dict(do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens, temperature=None,
                top_p=None, top_k=None, pad_token_id=getattr(model.config, "pad_token_id", None) or 0)


def gpu_name():
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
