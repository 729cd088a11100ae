// libFuzzer target: config.json parsing on arbitrary text. Any input must either give a
// ModelConfig whose invariants hold or be refused with CheckpointError; for an accepted config the
// module list (the loader's next step) is built too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "exactq/model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const exactq::ModelConfig c = exactq::parse_model_config(text, "fuzz/config.json");
    if (c.num_heads % c.num_kv_heads != 0 || c.head_dim % 2 != 0 || c.hidden_size < 1 || c.vocab_size < 1) std::abort();
    if (c.quantization.base && !(exactq::is_supported_bits(c.quantization.base->bits) &&
                                 exactq::is_supported_group(c.quantization.base->group)))
      std::abort();
    // Bounded: at most 4096 layers of a dozen modules.
    const auto modules = exactq::model_modules(c, true);
    if (modules.empty()) std::abort();
  } catch (const exactq::CheckpointError&) {
  }
  return 0;
}
