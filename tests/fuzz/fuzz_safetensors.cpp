// libFuzzer target: the safetensors header parser on arbitrary bytes. Any input must either parse
// or be refused with CheckpointError; a parsed header must describe only bytes inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "exactq/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const exactq::SafetensorsHeader h = exactq::parse_safetensors_header(file, "fuzz.safetensors");
    std::uint64_t covered = 0;
    for (const auto& t : h.tensors) {
      // The parser's promise: every span lies in the data, in order, without gaps.
      if (t.begin != covered || t.end < t.begin || h.data_offset + t.end > size) std::abort();
      covered = t.end;
      // Touch the first and last byte of every tensor: ASan reports a span past the input.
      if (t.end > t.begin) {
        volatile std::uint8_t first = data[h.data_offset + t.begin], last = data[h.data_offset + t.end - 1];
        (void)first;
        (void)last;
      }
    }
    if (h.data_offset + covered != size) std::abort();
  } catch (const exactq::CheckpointError&) {
  }
  return 0;
}
