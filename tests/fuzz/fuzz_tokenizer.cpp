// libFuzzer target: tokenizer.json parsing on arbitrary text. Any input must either give a
// Tokenizer or be refused with CheckpointError. An accepted tokenizer must encode fixed texts to
// ids inside its vocabulary, decode them without error, and stream exactly what decode gives.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "exactq/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const exactq::Tokenizer t = exactq::Tokenizer::from_json(text, "fuzz/tokenizer.json");
    for (const char* sample : {"Hello world!  12345 <s> caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\n\t", ""}) {
      std::vector<std::int32_t> ids;
      try {
        ids = t.encode(sample, true);
      } catch (const std::invalid_argument&) {
        continue;  // a pattern past its match limit, or NFC of text it does not cover
      }
      for (const std::int32_t id : ids)
        if (id < 0 || id >= t.vocab_size()) std::abort();
      const std::string all = t.decode(ids);
      auto stream = t.stream();
      std::string streamed;
      for (const std::int32_t id : ids) streamed += stream.step(id);
      if (streamed + stream.finish() != all) std::abort();
    }
  } catch (const exactq::CheckpointError&) {
  }
  return 0;
}
