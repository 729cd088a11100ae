#!/usr/bin/env python3
"""Side-by-side anchors for `exactq bench`: the same shapes and M through PyTorch's
int4 tinygemm kernel (group 64, bf16) and cuBLAS bf16 (torch.matmul on dense weights), timed
the way exactq times (median of CUDA-event-timed launches after warm-up, rotating among enough
weight copies that none is served from the device's L2). Runs only where PyTorch and a GPU are;
elsewhere it says so and exits 0. Each backend that fails is reported, not fatal.

Usage: bench/anchors.py [--shapes NxK,...] [--m 1,2,4,8,16] [--json FILE]
"""
import argparse
import json
import math
import statistics
import sys

PRESET_SHAPES = "15360x3840,3840x15360,262144x3840,14336x4096,4096x14336,128256x4096,17408x5120,5120x17408,28672x8192"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=PRESET_SHAPES)
    ap.add_argument("--m", default="1,2,4,8,16")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("anchors: PyTorch is not installed here; nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("anchors: no CUDA device; nothing to measure")
        return 0
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    ms = [int(v) for v in args.m.split(",")]
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2_bytes = float(getattr(props, "L2_cache_size", 50 * 2**20))
    results = []

    def timing_copies(nbytes, parameter_bytes):
        # bench/timing.h, timing_copies: the other copies hold four times the L2, their parameters
        # twice the L2 (they may be cached with the default policy), at least three copies, at
        # most 1024 and 16 GB.
        copies = max(3, math.ceil(4 * l2_bytes / nbytes))
        if parameter_bytes > 0:
            copies = max(copies, 1 + math.ceil(2 * l2_bytes / parameter_bytes))
        return min(copies, 1024, max(3, int(16e9 // nbytes)))

    def time_us(fn, copies):
        for i in range(3):
            fn(copies[i % len(copies)])
        torch.cuda.synchronize()
        times = []
        for r in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for c in copies:
                fn(c)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1000.0 / len(copies))
        return statistics.median(times)

    for n, k in shapes:
        gen = torch.Generator(device=dev).manual_seed(n * 31 + k)
        # cuBLAS bf16: dense weights, 2 bytes each.
        dense_bytes = n * k * 2
        dense_copies = [torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=gen)
                        for _ in range(timing_copies(dense_bytes, 0))]
        # tinygemm int4 (group 64): packed int4 weights plus bf16 scales and zeros.
        tiny_copies, tiny_error = [], None
        try:
            for _ in range(timing_copies(n * k // 2 + n * (k // 64) * 4, n * (k // 64) * 4)):
                q = torch.randint(0, 16, (n, k), device=dev, dtype=torch.int32, generator=gen)
                q_u8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
                packed = torch.ops.aten._convert_weight_to_int4pack(q_u8, 8)
                sz = torch.randn(k // 64, n, 2, device=dev, dtype=torch.bfloat16, generator=gen) * 0.01
                tiny_copies.append((packed, sz))
        except Exception as e:  # the private op's signature moves between versions
            tiny_error = f"{type(e).__name__}: {e}"
        for m in ms:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=gen)
            row = {"n": n, "k": k, "m": m}
            try:
                row["cublas_bf16_us"] = time_us(lambda w: torch.matmul(x, w.t()), dense_copies)
            except Exception as e:
                row["cublas_bf16_error"] = f"{type(e).__name__}: {e}"
            if tiny_error is None:
                try:
                    row["tinygemm_int4_us"] = time_us(
                        lambda c: torch.ops.aten._weight_int4pack_mm(x, c[0], 64, c[1]), tiny_copies)
                except Exception as e:
                    row["tinygemm_int4_error"] = f"{type(e).__name__}: {e}"
            else:
                row["tinygemm_int4_error"] = tiny_error
            results.append(row)
            print(f"{n:>7} {k:>6} M={m:>3}  cublas_bf16 {row.get('cublas_bf16_us', float('nan')):9.1f} us"
                  f"  tinygemm_int4 {row.get('tinygemm_int4_us', float('nan')):9.1f} us", flush=True)
        del dense_copies, tiny_copies
        torch.cuda.empty_cache()
    if any("tinygemm_int4_error" in r for r in results):
        print("tinygemm:", next(r["tinygemm_int4_error"] for r in results if "tinygemm_int4_error" in r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
