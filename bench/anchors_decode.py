#!/usr/bin/env python3
"""The reference a user would otherwise run, beside `exactq bench-decode`: the same MLX checkpoint
dequantized into Hugging Face transformers (bf16, its default dynamic cache, eager PyTorch), greedy
decode after a prompt of C random tokens, in tokens per second. Run it on the same GPU as
bench-decode, one right after the other, and compare the two there; the ratio is the claim, not
either number alone.

The prefill is timed apart: a step's time is (time for P + N new tokens - time for P new tokens)
/ N, with P = 1, so the prompt's forward is not counted as decode. Runs only where PyTorch,
transformers and a GPU are; elsewhere it says so and exits 0.

Usage: bench/anchors_decode.py --model DIR [--context 512,4096] [--tokens 64] [--json FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_checkpoint  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--context", default="512,4096")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per context; the median is reported")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    found = hf_checkpoint.runtime("anchors_decode")
    if found is None:
        return 0
    torch, transformers = found
    contexts = [int(c) for c in args.context.split(",")]
    if args.tokens < 1 or any(c < 1 for c in contexts):
        raise SystemExit("anchors_decode: --tokens and every --context must be positive")

    model, load_s = hf_checkpoint.load_model(args.model)
    params = sum(p.numel() for p in model.parameters())
    print(f"anchors_decode: {args.model} in transformers {transformers.__version__}, bf16, {params / 1e9:.3f} G "
          f"parameters, loaded in {load_s:.1f} s on {hf_checkpoint.gpu_name()}", flush=True)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed)
    rows = []
    for context in contexts:
        prompt = torch.randint(3, vocab, (1, context), generator=gen).to("cuda")
        attention = torch.ones_like(prompt)

        def run(new_tokens):
            torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.inference_mode():
                out = model.generate(prompt, attention_mask=attention,
                                     **hf_checkpoint.greedy_generation_kwargs(model, new_tokens))
            torch.cuda.synchronize()
            assert out.shape[1] == context + new_tokens, out.shape
            return time.perf_counter() - start

        run(args.tokens + 1)  # warm-up: kernels, allocator
        steps = []
        for _ in range(args.repeats):
            prefill = run(1)
            total = run(args.tokens + 1)
            steps.append((total - prefill) / args.tokens)
        step = statistics.median(steps)
        row = {"context": context, "tokens": args.tokens, "tokens_per_second": 1.0 / step, "us_per_step": step * 1e6,
               "us_per_step_runs": [s * 1e6 for s in steps]}
        rows.append(row)
        print(f"  context {context:6d}: {1.0 / step:8.1f} tok/s ({step * 1e6:8.0f} us/step; runs "
              + ", ".join(f"{s * 1e6:.0f}" for s in steps) + ")", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"anchor": "transformers greedy decode, bf16 dequantized", "model": args.model,
                       "gpu": hf_checkpoint.gpu_name(), "torch": torch.__version__,
                       "transformers": transformers.__version__, "parameters": params, "load_seconds": load_s,
                       "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
