// A measurement prototype, not part of the library (built by hand, see
// docs/benchmark_results/2026-12-03-h200-session5-qmv.md §2): 4-bit qmv at M = 1 with exact
// integer chunk dots. x of each 32-value chunk becomes integers X_i = rint(x_i * 2^(21-e))
// (|X| < 2^22), split into three (or two) balanced signed bytes; codes are masked in place
// (w & 0x0F0F0F0F, w & 0xF0F0F0F0) and dp4a'd against the digits. It times itself against a
// streaming read. Build: nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -o proto FILE
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <cmath>
#include <vector>
#include <random>
#include <algorithm>

#include <cstring>

#include "prototype_common.cuh"


constexpr int kThreads = 256, kWarps = 8;

__device__ __forceinline__ int dp4a_us(unsigned a, unsigned b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ int piece(int c, int p) { return ((c >> 5) * 6 + p) * 32 + (c & 31); }

template <int DIGITS>
__device__ void stage(uint4* dig, float2* facts, const uint16_t* x, int k) {
  const int chunks = k / 32;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[32];
    unsigned m = 0;
    for (int i = 0; i < 32; ++i) {
      v[i] = __uint_as_float(unsigned(x[c * 32 + i]) << 16);
      m = max(m, __float_as_uint(v[i]) & 0x7fffffffu);
    }
    int e = int(m >> 23) - 127;  // |x| < 2^(e+1)
    e = e < -100 ? -100 : e;
    const int top = DIGITS == 3 ? 21 : 14;
    const float f = ldexpf(1.0f, top - e);
    int d[3][32];
    float s = 0;
    for (int i = 0; i < 32; ++i) {
      s = __fadd_rn(s, v[i]);
      int X = __float2int_rn(__fmul_rn(v[i], f));
      const int d0 = ((X + 128) & 255) - 128;
      X = (X - d0) >> 8;
      const int d1 = ((X + 128) & 255) - 128;
      X = (X - d1) >> 8;
      d[0][i] = d0, d[1][i] = d1, d[2][i] = X;
    }
    facts[c] = make_float2(s, ldexpf(1.0f, e - top));
    for (int t = 0; t < DIGITS; ++t)
      for (int h = 0; h < 2; ++h) {
        unsigned u[4];
        for (int jj = 0; jj < 2; ++jj) {
          const int j = 2 * h + jj;
          unsigned ev = 0, od = 0;
          for (int b = 0; b < 4; ++b) {
            ev |= unsigned(d[t][8 * j + 2 * b] & 255) << (8 * b);
            od |= unsigned(d[t][8 * j + 2 * b + 1] & 255) << (8 * b);
          }
          u[2 * jj] = ev, u[2 * jj + 1] = od;
        }
        dig[piece(c, 2 * t + h)] = make_uint4(u[0], u[1], u[2], u[3]);
      }
  }
}

template <int ROWS, int DIGITS>
__global__ void __launch_bounds__(kThreads, 2)
    qmv_dp4a(const uint8_t* packed, const uint16_t* scales, const uint16_t* biases, const uint16_t* x, float* y,
             int n, int k) {
  extern __shared__ uint4 smem[];
  uint4* dig = smem;
  float2* facts = reinterpret_cast<float2*>(smem + (k / 32) * 6);
  stage<DIGITS>(dig, facts, x, k);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tasks = n / ROWS;
  const int warps_total = gridDim.x * kWarps;
  const int chunks = k / 32;
  const long row_bytes = k / 2;
  const int groups = k / 64;
  for (int task = warp * gridDim.x + blockIdx.x; task < tasks; task += warps_total) {
    const uint8_t* wrow[ROWS];
    int prow[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      wrow[r] = packed + long(task * ROWS + r) * row_bytes;
      prow[r] = (task * ROWS + r) * groups;
      asm("" : "+l"(wrow[r]), "+r"(prow[r]));
    }
    float total[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) total[r] = 0.f;
    uint4 wa[ROWS], wb[ROWS];
    float sa[ROWS], ba[ROWS], sb[ROWS], bb[ROWS];
    auto load = [&](int c, uint4 (&w)[ROWS], float (&sc)[ROWS], float (&bi)[ROWS]) {
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        w[r] = __ldcs(reinterpret_cast<const uint4*>(wrow[r]) + c);
        sc[r] = __uint_as_float(unsigned(scales[prow[r] + (c >> 1)]) << 16);
        bi[r] = __uint_as_float(unsigned(biases[prow[r] + (c >> 1)]) << 16);
      }
    };
    auto step = [&](const uint4 (&w)[ROWS], const float (&sc)[ROWS], const float (&bi)[ROWS], int c) {
      int acc[ROWS][DIGITS][2];
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int t = 0; t < DIGITS; ++t) acc[r][t][0] = acc[r][t][1] = 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint4 dg[DIGITS];
#pragma unroll
        for (int t = 0; t < DIGITS; ++t) dg[t] = dig[piece(c, 2 * t + h)];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
          const unsigned w0 = h ? w[r].z : w[r].x, w1 = h ? w[r].w : w[r].y;
          const unsigned lo0 = w0 & 0x0F0F0F0Fu, hi0 = w0 & 0xF0F0F0F0u;
          const unsigned lo1 = w1 & 0x0F0F0F0Fu, hi1 = w1 & 0xF0F0F0F0u;
#pragma unroll
          for (int t = 0; t < DIGITS; ++t) {
            acc[r][t][0] = dp4a_us(lo0, dg[t].x, acc[r][t][0]);
            acc[r][t][1] = dp4a_us(hi0, dg[t].y, acc[r][t][1]);
            acc[r][t][0] = dp4a_us(lo1, dg[t].z, acc[r][t][0]);
            acc[r][t][1] = dp4a_us(hi1, dg[t].w, acc[r][t][1]);
          }
        }
      }
      const float2 f = facts[c];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        float dsum = 0.f;
#pragma unroll
        for (int t = DIGITS - 1; t >= 0; --t) {
          const int D = acc[r][t][0] + (acc[r][t][1] >> 4);
          dsum = __fmaf_rn(dsum, 256.0f, __int2float_rn(D));
        }
        total[r] = __fadd_rn(total[r], __fmaf_rn(sc[r], __fmul_rn(dsum, f.y), __fmul_rn(bi[r], f.x)));
      }
    };
    int c = lane;
    load(c, wa, sa, ba);
    while (c < chunks) {
      if (c + 32 < chunks) load(c + 32, wb, sb, bb);
      step(wa, sa, ba, c);
      c += 32;
      if (c >= chunks) break;
      if (c + 32 < chunks) load(c + 32, wa, sa, ba);
      step(wb, sb, bb, c);
      c += 32;
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      float t = total[r];
      for (int m = 16; m; m >>= 1) t = __fadd_rn(t, __shfl_xor_sync(~0u, t, m));
      if (lane == 0) y[task * ROWS + r] = t;
    }
  }
}

__global__ void read_kernel(const uint4* data, size_t count, unsigned* sink) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < count; i += 4 * stride) {
    uint4 v[4];
    for (int u = 0; u < 4; ++u) v[u] = __ldcs(data + i + u * stride);
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < count; i += stride) { const uint4 v = __ldcs(data + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x9e3779b9u) *sink = acc;
}

static uint16_t to_bf16(float f) { uint32_t u; memcpy(&u, &f, 4); return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
static float from_bf16(uint16_t h) { uint32_t u = uint32_t(h) << 16; float f; memcpy(&f, &u, 4); return f; }

template <int ROWS, int DIGITS>
void run(int n, int k, const char* name) {
  const size_t wbytes = size_t(n) * k / 2, pcount = size_t(n) * (k / 64);
  const double bytes = wbytes + 4.0 * pcount + 2.0 * k + 4.0 * n;
  const int copies = std::max(2, int(std::ceil(240e6 / bytes)));
  std::mt19937 rng(1234);
  std::vector<uint8_t> hw(wbytes);
  for (auto& b : hw) b = uint8_t(rng());
  std::vector<uint16_t> hs(pcount), hb(pcount), hx(k);
  std::normal_distribution<float> nd;
  for (size_t i = 0; i < pcount; ++i) hs[i] = to_bf16(0.01f * (1 + 0.1f * nd(rng))), hb[i] = to_bf16(-0.08f + 0.01f * nd(rng));
  for (int i = 0; i < k; ++i) hx[i] = to_bf16(nd(rng) * (i % 97 == 0 ? 30.f : 1.f));
  std::vector<uint8_t*> dw(copies);
  uint16_t *ds, *db, *dx; float* dy;
  for (auto& p : dw) { PROTOTYPE_CHECK(cudaMalloc(&p, wbytes)); PROTOTYPE_CHECK(cudaMemcpy(p, hw.data(), wbytes, cudaMemcpyHostToDevice)); }
  PROTOTYPE_CHECK(cudaMalloc(&ds, pcount * 2)); PROTOTYPE_CHECK(cudaMalloc(&db, pcount * 2)); PROTOTYPE_CHECK(cudaMalloc(&dx, k * 2)); PROTOTYPE_CHECK(cudaMalloc(&dy, n * 4));
  PROTOTYPE_CHECK(cudaMemcpy(ds, hs.data(), pcount * 2, cudaMemcpyHostToDevice));
  PROTOTYPE_CHECK(cudaMemcpy(db, hb.data(), pcount * 2, cudaMemcpyHostToDevice));
  PROTOTYPE_CHECK(cudaMemcpy(dx, hx.data(), k * 2, cudaMemcpyHostToDevice));
  const size_t smem = size_t(k / 32) * 96 + size_t(k / 32) * 8;
  auto kern = qmv_dp4a<ROWS, DIGITS>;
  PROTOTYPE_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0, sms = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kThreads, smem));
  PROTOTYPE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaFuncAttributes attr; PROTOTYPE_CHECK(cudaFuncGetAttributes(&attr, kern));
  const int tasks = n / ROWS;
  const int grid = std::min(per_sm * sms, (tasks + kWarps - 1) / kWarps);
  auto launch = [&](int i) { kern<<<grid, kThreads, smem>>>(dw[i], ds, db, dx, dy, n, k); };
  launch(0);
  PROTOTYPE_CHECK(cudaDeviceSynchronize());
  std::vector<float> hy(n);
  PROTOTYPE_CHECK(cudaMemcpy(hy.data(), dy, n * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int r = 0; r < n; r += std::max(1, n / 512)) {
    double acc = 0, mag = 0;
    for (int i = 0; i < k; ++i) {
      const int q = (hw[size_t(r) * k / 2 + i / 2] >> (4 * (i & 1))) & 15;
      const double w = double(from_bf16(hs[size_t(r) * (k / 64) + i / 64])) * q + from_bf16(hb[size_t(r) * (k / 64) + i / 64]);
      acc += w * from_bf16(hx[i]);
      mag += std::fabs(w * from_bf16(hx[i]));
    }
    worst = std::max(worst, std::fabs(acc - hy[r]) / mag);
  }
  const float us = median_launch_us(launch, copies);
  printf("%-10s %6d x %5d rows %d digits %d: %7.1f us  %7.1f GB/s  regs %d  blocks/SM %d  max err/sum|xw| %.3g\n", name, n, k,
         ROWS, DIGITS, us, bytes / us * 1e-3, attr.numRegs, per_sm, worst);
  for (auto p : dw) cudaFree(p);
  cudaFree(ds); cudaFree(db); cudaFree(dx); cudaFree(dy);
}

int main() {
  {
    const size_t bytes = size_t(2) << 30;
    uint4* d; unsigned* s;
    PROTOTYPE_CHECK(cudaMalloc(&d, bytes)); PROTOTYPE_CHECK(cudaMalloc(&s, 4)); PROTOTYPE_CHECK(cudaMemset(d, 0x5a, bytes));
    int sms; PROTOTYPE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int per_sm; PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel, 512, 0));
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    std::vector<float> t;
    for (int i = 0; i < 12; ++i) {
      cudaEventRecord(a); read_kernel<<<per_sm * sms, 512>>>(d, bytes / 16, s); cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 2) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    printf("read ceiling: %.1f GB/s\n", bytes / (t[t.size() / 2] * 1e-3) * 1e-9);
    cudaFree(d); cudaFree(s);
  }
  run<4, 3>(28672, 8192, "big");
  run<4, 2>(28672, 8192, "big");
  run<2, 3>(28672, 8192, "big");
  run<2, 2>(28672, 8192, "big");
  run<4, 3>(128256, 4096, "llama.head");
  run<4, 2>(128256, 4096, "llama.head");
  run<4, 3>(14336, 4096, "gate_up");
  run<4, 3>(17408, 5120, "qwen.gu");
  run<4, 2>(17408, 5120, "qwen.gu");
  return 0;
}
