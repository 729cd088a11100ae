// summarize() on a make-model checkpoint, against counts computed here from the dimensions alone.
#include <gtest/gtest.h>

#include "checkpoint_fixture.h"
#include "exactq/checkpoint_writer.h"
#include "exactq/inspect.h"

namespace exactq::test {
namespace {

// Bytes of an [n, k] matrix at 4 bits, group 64, bf16 scales and biases.
std::int64_t q4(std::int64_t n, std::int64_t k) { return n * k / 2 + 2 * n * (k / 64) * 2; }

TEST(Inspect, CountsParametersAndBytes) {
  for (const std::string arch : {"llama", "gemma3"}) {
    SCOPED_TRACE(arch);
    TempDir dir;
    MakeModelOptions o;
    o.arch = arch;
    o.seed = fresh_seed() % 1000;
    make_model(o, (dir.path / "m").string());
    const Checkpoint c = Checkpoint::open((dir.path / "m").string());
    const CheckpointSummary s = summarize(c);
    // tiny: hidden 256, intermediate 512, 4 heads of 64, 2 kv heads, vocab 1024, 2 layers.
    const std::int64_t h = 256, f = 512, q = 256, kv = 128, v = 1024, layers = 2;
    const bool gemma = arch == "gemma3";
    const std::int64_t norms_per_layer = gemma ? 4 * h + 2 * 64 : 2 * h;
    const std::int64_t layer_params = 2 * q * h + 2 * kv * h + 3 * f * h + norms_per_layer;
    const std::int64_t layer_bytes = 2 * q4(q, h) + 2 * q4(kv, h) + 3 * q4(f, h) + 2 * norms_per_layer;
    const std::int64_t heads = gemma ? 1 : 2;  // the embedding, and an untied head
    EXPECT_EQ(s.parameters, heads * v * h + layers * layer_params + h);
    EXPECT_EQ(s.tensor_bytes, heads * q4(v, h) + layers * layer_bytes + 2 * h);
    const std::int64_t embedding_not_read = gemma ? 0 : q4(v, h) - q4(1, h);
    EXPECT_EQ(s.decode_bytes_per_token, s.tensor_bytes - embedding_not_read);
    EXPECT_EQ(s.file_bytes, fs::file_size(dir.path / "m" / "model.safetensors"));
    EXPECT_EQ(s.tied, gemma);
    // One group per role, the layer's modules counted once per layer.
    const std::string down = std::string(gemma ? "language_model." : "") + "model.layers.*.mlp.down_proj";
    const auto it = std::find_if(s.groups.begin(), s.groups.end(), [&](const ModuleGroup& g) { return g.role == down; });
    ASSERT_NE(it, s.groups.end());
    EXPECT_EQ(it->count, 2);
    EXPECT_EQ(it->storage, "4-bit g64 bf16");
    EXPECT_EQ(it->bytes, 2 * q4(h, f));
  }
}

}  // namespace
}  // namespace exactq::test
