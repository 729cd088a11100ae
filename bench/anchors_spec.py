#!/usr/bin/env python3
"""Hugging Face transformers' speculative decoding beside `exactq bench-spec`: the same MLX
checkpoint(s) dequantized into transformers (bf16), greedy decode and assisted generation (its
speculative decoding, with a draft model) of the same prompts, on the same GPU as bench-spec. For each
prompt: tokens per second of both, and whether the assisted output equals the greedy output token
for token (else the first differing position). Without --draft the model drafts for itself: every
draft is then the model's own greedy token, so any difference is the verify forward's rounding.

Each generate() call is timed whole (prefill included, the same prompt in both arms) after one
untimed warm-up of each. Runs only where PyTorch, transformers and a GPU are; elsewhere it says so
and exits 0.

Usage: bench/anchors_spec.py --model DIR [--draft DIR] [--prompts N --prompt-length L |
                             --prompts-json FILE] [--tokens 128] [--assistant-tokens K] [--json FILE]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_checkpoint  # noqa: E402


def prompts_from(args, vocab, torch):
    if args.prompts_json:
        from tokenizers import Tokenizer

        with open(args.prompts_json) as f:
            data = json.load(f)
        entries = data["prompts"] if isinstance(data, dict) else data  # as bench-spec --prompt-file reads it
        texts = [p["text"] if isinstance(p, dict) else p for p in entries]
        tokenizer = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
        return [tokenizer.encode(t).ids for t in texts]
    gen = torch.Generator().manual_seed(args.seed)
    return [torch.randint(3, vocab, (args.prompt_length,), generator=gen).tolist() for _ in range(args.prompts)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", help="the draft model's directory (default: the model drafts for itself)")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--prompt-length", type=int, default=32)
    ap.add_argument("--prompts-json", help='{"prompts": [text or {"text": ...}, ...]} or a bare array, encoded with '
                    "the model's tokenizer.json")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--assistant-tokens", type=int, default=0,
                    help="drafts per round, fixed (default: transformers' own schedule, as a user gets it)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    found = hf_checkpoint.runtime("anchors_spec")
    if found is None:
        return 0
    torch, transformers = found
    if args.tokens < 1 or args.prompts < 1 or args.prompt_length < 1:
        raise SystemExit("anchors_spec: --tokens, --prompts and --prompt-length must be positive")

    model, load_s = hf_checkpoint.load_model(args.model)
    draft, draft_load_s = (model, 0.0) if not args.draft else hf_checkpoint.load_model(args.draft)
    if args.assistant_tokens > 0:
        draft.generation_config.num_assistant_tokens = args.assistant_tokens
        draft.generation_config.num_assistant_tokens_schedule = "constant"
        draft.generation_config.assistant_confidence_threshold = 0.0
    drafting = "itself" if not args.draft else args.draft
    print(f"anchors_spec: {args.model} drafted by {drafting}, transformers {transformers.__version__}, bf16, on "
          f"{hf_checkpoint.gpu_name()} (loaded in {load_s + draft_load_s:.1f} s)", flush=True)
    prompts = prompts_from(args, model.config.vocab_size, torch)

    def run(ids, assisted):
        x = torch.tensor([ids], device="cuda")
        kwargs = hf_checkpoint.greedy_generation_kwargs(model, args.tokens)
        if assisted:
            kwargs["assistant_model"] = draft
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(x, attention_mask=torch.ones_like(x), **kwargs)
        torch.cuda.synchronize()
        return out[0, len(ids):].tolist(), time.perf_counter() - start

    run(prompts[0], False)
    run(prompts[0], True)
    rows = []
    for i, ids in enumerate(prompts):
        greedy, greedy_s = run(ids, False)
        assisted, assisted_s = run(ids, True)
        first = next((j for j, (a, b) in enumerate(zip(greedy, assisted)) if a != b), None)
        if first is None and len(greedy) != len(assisted):
            first = min(len(greedy), len(assisted))
        row = {"prompt": i, "prompt_tokens": len(ids), "greedy_tokens_per_second": len(greedy) / greedy_s,
               "assisted_tokens_per_second": len(assisted) / assisted_s, "identical": first is None,
               "first_difference": first, "greedy": greedy, "assisted": assisted}
        rows.append(row)
        print(f"  prompt {i:3d} ({len(ids):5d} tokens): greedy {row['greedy_tokens_per_second']:7.1f} tok/s, assisted "
              f"{row['assisted_tokens_per_second']:7.1f} tok/s, "
              + ("identical" if first is None else f"differs from position {first}"), flush=True)
    same = sum(r["identical"] for r in rows)
    greedy_rate = sum(len(r["greedy"]) for r in rows) / sum(len(r["greedy"]) / r["greedy_tokens_per_second"] for r in rows)
    assisted_rate = sum(len(r["assisted"]) for r in rows) / sum(
        len(r["assisted"]) / r["assisted_tokens_per_second"] for r in rows)
    print(f"anchors_spec: assisted output equals greedy on {same} of {len(rows)} prompts; greedy {greedy_rate:.1f} "
          f"tok/s, assisted {assisted_rate:.1f} tok/s ({assisted_rate / greedy_rate:.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"anchor": "transformers greedy and assisted generation, bf16 dequantized", "model": args.model,
                       "draft": drafting, "gpu": hf_checkpoint.gpu_name(), "torch": torch.__version__,
                       "transformers": transformers.__version__, "tokens": args.tokens,
                       "assistant_tokens": args.assistant_tokens or "transformers' schedule",
                       "identical_prompts": same, "prompts": len(rows), "greedy_tokens_per_second": greedy_rate,
                       "assisted_tokens_per_second": assisted_rate, "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
