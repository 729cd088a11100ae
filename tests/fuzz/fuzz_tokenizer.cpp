// libFuzzer target: tokenizer.json parsing on arbitrary text. Any input must either give a
// Tokenizer or be refused with CheckpointError. An accepted tokenizer must encode fixed texts to
// ids inside its vocabulary (or refuse with CheckpointError a section it does not support),
// decode them without error, and stream exactly what decode gives; every id, one no token has
// included, must decode and stream alike.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "exactq/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const exactq::Tokenizer t = exactq::Tokenizer::from_json(text, "fuzz/tokenizer.json");
    for (const char* sample : {"Hello world!  12345 <s> caf\xc3\xa9 e\xcc\x81 \xef\xac\x81 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\n\t", ""}) {
      std::vector<std::int32_t> ids;
      try {
        ids = t.encode(sample, true);
      } catch (const exactq::CheckpointError&) {
        break;  // a section the encoder does not support
      } catch (const std::invalid_argument&) {
        continue;  // a pattern past its match limit
      }
      for (const std::int32_t id : ids)
        if (id < 0 || id >= t.vocab_size()) std::abort();
      const std::string all = t.decode(ids);
      auto stream = t.stream();
      std::string streamed;
      for (const std::int32_t id : ids) streamed += stream.step(id);
      if (streamed + stream.finish() != all) std::abort();
    }
    // Every id of the vocabulary's ends, and ids no token has, one by one and together.
    const std::vector<std::int32_t> ids = {0, 1, 2, t.vocab_size() - 1, t.vocab_size(), -1, 3, 4, 5};
    const std::string all = t.decode(ids, false);
    auto stream = t.stream();
    std::string streamed;
    for (const std::int32_t id : ids) streamed += stream.step(id);
    if (streamed + stream.finish() != all) std::abort();
  } catch (const exactq::CheckpointError&) {
  }
  return 0;
}
