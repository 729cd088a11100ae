// qmv_mma's fragment layout: the same codes, scales and biases as MLX's layout, re-laid once (at
// load time) so that qmv_mma's lanes load their tensor-core fragments straight into registers
// with 16-byte loads, and every warp-wide load reads 512 contiguous bytes.
//
// Why: qmv_mma reads, per warp, 16 rows at a time. In MLX's row-major layout those are 16 row
// streams; copied through a shared-memory ring they read at ~80 % of a streaming read at best
// (docs/benchmark_results/2026-12-03-h200-session8.md §2), while register loads stream at
// 90-100 %. The fragment layout makes each lane's 16 bytes the exact words it feeds the mma.
//
// The one definition (the CPU conversion and the CUDA kernel both use these functions):
// - Rows go in tasks of 16 (the mma's M); N is padded up to a multiple of 16 with zero rows.
// - A task's K is cut into rounds of `round_row_bytes(bits, group)` bytes per row (128: whole
//   groups at every format). Per task and round the codes are
//   [half h][piece p][lane l][16 bytes]: lane l = 4 g + t holds, for row 16 task + g + 8 h, the
//   words that qmv_mma's lane (g, t) feeds the mma. Its word i (i = 4 p + q) is the row's word
//   that MLX's layout puts at byte `mlx_word_byte(...)`: for each 32-code chunk of the round,
//   word t of the chunk (4 bits), or words 2t and 2t + 1 (8 bits).
// - Scales and biases, each: per task and round [g][group i of the round][half h], so a lane's
//   parameters for rows g and g + 8 are 4 * groups-per-round contiguous bytes.
// The codes' bits and the parameters' values are unchanged: only their places move.
#pragma once
#include <cstdint>

#include "exactq/format.h"

namespace exactq::mma_layout {

inline constexpr int kTaskRows = 16;      // the mma's M
inline constexpr int kLanes = 32;
inline constexpr int kPieceBytes = 16;     // one lane's load
inline constexpr int kPieceWarpBytes = kLanes * kPieceBytes;  // 512: one warp-wide load
// Bytes of a row per round: 128 (8 chunks at 4 bits, 4 at 8 bits). 64-byte rounds measured 2x
// slower where few warps have tasks: a round's 2 groups gave a lone warp too little independent
// work between the round loop's branches (session 8 §4).
inline constexpr int kRoundRowBytes = 128;

EXACTQ_HD constexpr bool serves(int bits) { return bits == 4 || bits == 8; }
EXACTQ_HD constexpr int round_row_bytes(int bits, int group) { return group * bits / 8 > kRoundRowBytes ? group * bits / 8 : kRoundRowBytes; }
EXACTQ_HD constexpr int round_values(int bits, int group) { return round_row_bytes(bits, group) * 8 / bits; }
EXACTQ_HD constexpr int groups_per_round(int bits, int group) { return round_values(bits, group) / group; }
// 16-byte pieces per lane and row half in a round: 1 or 2.
EXACTQ_HD constexpr int pieces(int bits, int group) { return round_row_bytes(bits, group) / 64; }
// Whether a matrix of these bits, group and K can be laid out (check_shape says why not).
EXACTQ_HD constexpr bool fits(int bits, int group, std::int64_t k) {
  return serves(bits) && k % round_values(bits, group) == 0;
}
EXACTQ_HD constexpr std::int64_t padded_rows(std::int64_t n) { return (n + kTaskRows - 1) / kTaskRows * kTaskRows; }

// Byte offset, within the fragment layout's codes, of word i of lane (g, t)'s half h in round j of
// task `task` (rounds: rounds per row).
EXACTQ_HD std::int64_t fragment_word_byte(std::int64_t task, std::int64_t rounds, std::int64_t j, int h, int lane, int i,
                                          int bits, int group) {
  const int p = i / 4, q = i % 4;
  const std::int64_t round_base = (task * rounds + j) * kTaskRows * round_row_bytes(bits, group);
  return round_base + (std::int64_t(h) * pieces(bits, group) + p) * kPieceWarpBytes + lane * kPieceBytes + 4 * q;
}
// Byte offset within an MLX row of the same word: chunk i / wpc of the round, word wpc t + i % wpc
// of that chunk (wpc = bits / 4 words per lane and chunk).
EXACTQ_HD std::int64_t mlx_word_byte(std::int64_t j, int t, int i, int bits, int group) {
  const int wpc = bits / 4;
  return j * round_row_bytes(bits, group) + std::int64_t(i / wpc) * chunk_bytes(bits) + 4 * (wpc * t + i % wpc);
}
// Element index, within the fragment layout's scales (or biases), of group i of round j for row
// 16 task + g + 8 h.
EXACTQ_HD std::int64_t fragment_param_index(std::int64_t task, std::int64_t rounds, std::int64_t j, int g, int i, int h,
                                            int bits, int group) {
  const int gpr = groups_per_round(bits, group);
  return (((task * rounds + j) * 8 + g) * gpr + i) * 2 + h;
}

// Throws std::invalid_argument unless this shape can be laid out (4 or 8 bits, K a multiple of a
// round).
void check_shape(std::int64_t n, std::int64_t k, int bits, int group);

}  // namespace exactq::mma_layout

namespace exactq {
// The matrix in qmv_mma's fragment layout (w must be in MLX's layout), and back. Both exact:
// to_mlx_layout(to_mma_fragments(w)) has w's bytes.
QuantizedMatrix to_mma_fragments(const QuantizedMatrixView& w);
QuantizedMatrix to_mlx_layout(const QuantizedMatrixView& w);
}  // namespace exactq
