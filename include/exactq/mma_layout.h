// qmv_mma's fragment layout: the same codes, scales and biases as MLX's layout, re-laid once (at
// load time) so that qmv_mma's lanes load their tensor-core fragments straight into registers
// with 16-byte loads, and every warp-wide load reads 512 contiguous bytes.
//
// Why: qmv_mma reads, per warp, 16 rows at a time. In MLX's row-major layout those are 16 row
// streams; copied through a shared-memory ring they read at ~80 % of a streaming read at best on
// the H200, while register loads stream at 90-100 %. The fragment layout makes each lane's 16 bytes the exact words it feeds the mma.
//
// The one definition (the CPU conversion and the CUDA kernel both use these functions):
// - Rows go in tasks of 16 (the mma's M); N is padded up to a multiple of 16 with zero rows.
// - A task's K is cut into rounds of `round_values(bits, group)` codes (256 at 2-6 bits, 128 at 8:
//   whole groups at every format; `round_row_bytes` bytes of each row). Per task and round the
//   codes are [piece u][lane l][16 bytes]: lane l = 4 g + t holds 4 * lane_pieces(bits) words,
//   word q in piece q / 4, and they hold the codes that qmv_mma's lane (g, t) feeds the mma for
//   rows 16 task + g (half h = 0) and 16 task + g + 8 (h = 1): for each 32-code chunk j of the
//   round, codes 8t .. 8t+7 of the chunk, as four pairs (8t + i, 8t + i + 4), i = 0..3.
//   - 8 bits: words h * 8 + 2j and h * 8 + 2j + 1 are MLX's words 2t and 2t + 1 of the chunk
//     (codes 8t .. 8t+3 and 8t+4 .. 8t+7, a byte each).
//   - 2 to 6 bits: each code is cut into bit planes, low bits first: 2 = [2], 3 = [2, 1], 4 = [4],
//     5 = [4, 1], 6 = [4, 2]. A plane of width w takes 2 w words per half; plane 0's words come
//     first (both halves), then plane 1's. Plane p's bits of code 8t + i + 4e of chunk j sit in
//     word `plane_word(bits, p, h, j)` at bit `plane_bit(bits, p, j, i, e)`: 16 e + w (4 (j mod
//     4 / w) + i). So pair i of a chunk is one shift and mask per plane, its two codes landing
//     in the two 16-bit halves. At 4 bits this is MLX's word t of the chunk, unchanged.
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
// Bytes of a row per round at 4 and 8 bits: 128 (8 chunks at 4 bits, 4 at 8 bits). 64-byte rounds
// (4 chunks at 4 bits) measured 2x slower where few warps have tasks: a round's 2 groups gave a
// lone warp too little independent work between the round loop's branches. So
// 2-6 bits keep 4 bits' 8 chunks per round (32 * bits bytes), whatever their byte count.
inline constexpr int kRoundRowBytes = 128;

EXACTQ_HD constexpr bool serves(int bits) { return is_supported_bits(bits); }
// 8 bits keeps MLX's words; every other width is cut into bit planes.
EXACTQ_HD constexpr bool planar(int bits) { return bits != 8; }
EXACTQ_HD constexpr int round_row_bytes(int bits, int /*group*/) { return planar(bits) ? 32 * bits : kRoundRowBytes; }
EXACTQ_HD constexpr int round_values(int bits, int group) { return round_row_bytes(bits, group) * 8 / bits; }
EXACTQ_HD constexpr int groups_per_round(int bits, int group) { return round_values(bits, group) / group; }
// 16-byte pieces a lane loads per round (both halves): bits at 2-6 bits, 4 at 8 bits.
EXACTQ_HD constexpr int lane_pieces(int bits, int group) { return round_row_bytes(bits, group) * kTaskRows / kPieceWarpBytes; }
// Whether a matrix of these bits, group and K can be laid out (check_shape says why not).
EXACTQ_HD constexpr bool fits(int bits, int group, std::int64_t k) {
  return serves(bits) && k % round_values(bits, group) == 0;
}
EXACTQ_HD constexpr std::int64_t padded_rows(std::int64_t n) { return (n + kTaskRows - 1) / kTaskRows * kTaskRows; }

// ---- the bit planes (2 to 6 bits) ----
EXACTQ_HD constexpr int plane_count(int bits) { return bits == 3 || bits == 5 || bits == 6 ? 2 : 1; }
EXACTQ_HD constexpr int plane_width(int bits, int plane) {
  const int low = bits >= 4 ? 4 : 2;
  return plane == 0 ? low : bits - low;
}
// The plane's lowest bit within the code.
EXACTQ_HD constexpr int plane_offset(int bits, int plane) { return plane == 0 ? 0 : plane_width(bits, 0); }
// The lane word (0 .. 4 * lane_pieces - 1, in load order) that holds plane `plane` of half h's
// codes of chunk j (4 / width chunks per word).
EXACTQ_HD constexpr int plane_word(int bits, int plane, int h, int j) {
  const int width = plane_width(bits, plane);
  const int base = plane == 0 ? 0 : 4 * plane_width(bits, 0);
  return base + h * 2 * width + j * width / 4;
}
// The bit of that word where the plane's field of code 8t + i + 4e of chunk j starts.
EXACTQ_HD constexpr int plane_bit(int bits, int plane, int j, int i, int e) {
  const int width = plane_width(bits, plane);
  return 16 * e + width * (4 * (j % (4 / width)) + i);
}
// Pair i of chunk j, as the kernel forms it: the plane's word shifted right by plane_shift (left
// where negative) and masked with plane_mask puts the plane's bits of codes 8t + i and 8t + i + 4
// at their place in the low and high 16-bit halves; the planes OR-ed together are the two codes.
EXACTQ_HD constexpr int plane_shift(int bits, int plane, int j, int i) {
  return plane_bit(bits, plane, j, i, 0) - plane_offset(bits, plane);
}
EXACTQ_HD constexpr std::uint32_t plane_mask(int bits, int plane) {
  return (((1u << plane_width(bits, plane)) - 1u) << plane_offset(bits, plane)) * 0x00010001u;
}
EXACTQ_HD constexpr std::uint32_t shifted(std::uint32_t word, int shift) { return shift >= 0 ? word >> shift : word << -shift; }

// Byte offset, within the fragment layout's codes, of lane word q of lane `lane` in round j of
// task `task` (rounds: rounds per row).
EXACTQ_HD std::int64_t lane_word_byte(std::int64_t task, std::int64_t rounds, std::int64_t j, int lane, int q, int bits,
                                      int group) {
  const std::int64_t round_base = (task * rounds + j) * kTaskRows * round_row_bytes(bits, group);
  return round_base + std::int64_t(q / 4) * kPieceWarpBytes + lane * kPieceBytes + 4 * (q % 4);
}
// 8 bits: the byte offset of word i (0..7) of half h, and the MLX row's byte of the same word:
// chunk i / 2 of the round, word 2t + i % 2 of that chunk.
EXACTQ_HD std::int64_t fragment_word_byte(std::int64_t task, std::int64_t rounds, std::int64_t j, int h, int lane, int i,
                                          int bits, int group) {
  return lane_word_byte(task, rounds, j, lane, h * round_row_bytes(bits, group) / 16 + i, bits, group);
}
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

// Throws std::invalid_argument unless this shape can be laid out (K a multiple of a round).
void check_shape(std::int64_t n, std::int64_t k, int bits, int group);

}  // namespace exactq::mma_layout

namespace exactq {
// The matrix in qmv_mma's fragment layout (w must be in MLX's layout), and back. Both exact:
// to_mlx_layout(to_mma_fragments(w)) has w's bytes. Throw std::invalid_argument where w does not
// validate (its dtype and layout included), is in the other layout, or cannot be laid out.
QuantizedMatrix to_mma_fragments(const QuantizedMatrixView& w);
QuantizedMatrix to_mlx_layout(const QuantizedMatrixView& w);
}  // namespace exactq
