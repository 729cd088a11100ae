#!/usr/bin/env python3
"""Trains one model of the pair (train/model.py SIZES) on the corpus (train/corpus.py) with the
tokenizer (train/tokenizer.py), and writes it as a Hugging Face checkpoint in bf16:
config.json, model.safetensors, generation_config.json and the tokenizer files, plus
metrics.json (the loss curve, the validation loss, parameters, tokens, time, greedy samples).

Each training file is one document: <|bos|> tokens <|eos|>, the documents concatenated; a step
takes `batch` random windows of `seq` + 1 tokens (seeded). AdamW, linear warm-up, cosine decay to
a tenth, bf16 autocast over f32 weights; the validation loss is measured every `eval_every` steps
on every whole window of the held-out split, and the checkpoint written is the one with the
lowest validation loss.

With --teacher (a checkpoint this script wrote), the model is distilled instead: its loss is the
KL divergence from the teacher's next-token distribution, so that a draft model learns to
predict what the target will say rather than what the text says. metrics.json then also records
how often the two models' greedy tokens agree on the held-out split.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import LlamaForCausalLM, hf_config  # noqa: E402

SAMPLE_PROMPTS = ["import os\n", "def main():\n", "class Parser:\n    def __init__(self", "    for key, value in "]


def tokens_of(tok, texts, eos):
    out = []
    for enc in tok.encode_batch(texts):
        out.extend(enc.ids)
        out.append(eos)
    return torch.tensor(out, dtype=torch.int64)


@torch.no_grad()
def validation_loss(model, val, seq, batch):
    model.eval()
    windows = (val.numel() - 1) // seq
    total, count = 0.0, 0
    for first in range(0, windows, batch):
        idx = torch.arange(first, min(first + batch, windows), device=val.device) * seq
        x = torch.stack([val[i:i + seq] for i in idx])
        y = torch.stack([val[i + 1:i + seq + 1] for i in idx])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        total += F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1), reduction="sum").item()
        count += y.numel()
    model.train()
    return total / count


def load_teacher(directory):
    config = json.load(open(os.path.join(directory, "config.json")))
    teacher = LlamaForCausalLM(config).cuda()
    teacher.load_state_dict({k: t.float() for k, t in load_file(os.path.join(directory, "model.safetensors")).items()})
    return teacher.eval()


@torch.no_grad()
def greedy_agreement(model, teacher, val, seq, batch):
    """The fraction of held-out positions where the two models' argmax tokens are the same."""
    model.eval()
    windows = (val.numel() - 1) // seq
    same, count = 0, 0
    for first in range(0, windows, batch):
        x = torch.stack([val[i * seq:(i + 1) * seq] for i in range(first, min(first + batch, windows))])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            same += (model(x).argmax(-1) == teacher(x).argmax(-1)).sum().item()
        count += x.numel()
    model.train()
    return same / count


@torch.no_grad()
def greedy(model, tok, prompt, n):
    ids = torch.tensor([tok.encode(prompt).ids], device="cuda")
    for _ in range(n):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            nxt = model(ids)[0, -1].argmax()
        ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
    return tok.decode(ids[0].tolist())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", required=True)
    p.add_argument("--tokenizer", required=True, help="directory of train/tokenizer.py's output")
    p.add_argument("--size", choices=["target", "draft"], required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--max-minutes", type=float, default=7.0, help="stop early past this (the checkpoint is still the best one)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--teacher", help="distil from this checkpoint (train.py's output) instead of the text")
    a = p.parse_args()
    start = time.time()
    torch.manual_seed(a.seed)
    tok = Tokenizer.from_file(os.path.join(a.tokenizer, "tokenizer.json"))
    eos = tok.token_to_id("<|eos|>")
    docs = [json.loads(line) for line in open(os.path.join(a.corpus, "corpus.jsonl"), encoding="utf-8")]
    train = tokens_of(tok, [d["text"] for d in docs if d["split"] == "train"], eos).cuda()
    val = tokens_of(tok, [d["text"] for d in docs if d["split"] == "val"], eos).cuda()
    print(f"[{a.size}] tokens: train {train.numel()}, val {val.numel()} ({time.time() - start:.1f} s)", flush=True)

    teacher = load_teacher(a.teacher) if a.teacher else None
    config = hf_config(a.size, tok.get_vocab_size(), max_positions=4096)
    model = LlamaForCausalLM(config, dropout=a.dropout).cuda()
    params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), fused=True)
    gen = torch.Generator(device="cuda").manual_seed(a.seed)
    offsets = torch.arange(a.seq + 1, device="cuda")

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        progress = (step - a.warmup) / max(1, a.steps - a.warmup)
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    curve, evals, best = [], [], (float("inf"), None, -1)
    step = 0
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, train.numel() - a.seq - 1, (a.batch,), device="cuda", generator=gen)
        window = train[starts[:, None] + offsets]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(window[:, :-1])
            if teacher is not None:
                with torch.no_grad():
                    target_logits = teacher(window[:, :-1])
        logits = logits.float().view(-1, logits.shape[-1])
        if teacher is None:
            loss = F.cross_entropy(logits, window[:, 1:].reshape(-1))
        else:
            loss = F.kl_div(F.log_softmax(logits, -1), F.log_softmax(target_logits.float().view_as(logits), -1),
                            log_target=True, reduction="batchmean")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0:
            curve.append([step, loss.item()])
        last = step == a.steps - 1 or time.time() - start > a.max_minutes * 60
        if (step + 1) % a.eval_every == 0 or last:
            v = validation_loss(model, val, a.seq, a.batch)
            evals.append([step + 1, v])
            if v < best[0]:
                best = (v, {k: t.detach().to(torch.bfloat16).cpu().clone() for k, t in model.state_dict().items()}, step + 1)
            print(f"[{a.size}] step {step + 1}: train {loss.item():.4f}, val {v:.4f}, {time.time() - start:.0f} s", flush=True)
        if last:
            break

    model.load_state_dict({k: t.float() for k, t in best[1].items()})
    model.eval()
    samples = {pr: greedy(model, tok, pr, 48) for pr in SAMPLE_PROMPTS}
    agreement = greedy_agreement(model, teacher, val, a.seq, a.batch) if teacher is not None else None
    os.makedirs(a.out, exist_ok=True)
    tensors = {k: t.contiguous() for k, t in best[1].items()}
    save_file(tensors, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "do_sample": False}, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer, name), os.path.join(a.out, name))
    metrics = dict(size=a.size, parameters=params, config=config, train_tokens=train.numel(), val_tokens=val.numel(),
                   steps=step + 1, tokens_seen=(step + 1) * a.batch * a.seq, best_step=best[2], val_loss=best[0],
                   seconds=time.time() - start, device=torch.cuda.get_device_name(), torch=torch.__version__,
                   args=vars(a), curve=curve, evals=evals, samples=samples, teacher_greedy_agreement=agreement)
    with open(os.path.join(a.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    print(f"[{a.size}] {params} parameters, best val {best[0]:.4f} at step {best[2]}, {time.time() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
