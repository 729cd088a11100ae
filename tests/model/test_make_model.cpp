// make-model -> loader round trips at `tiny` for each architecture, determinism in the seed,
// sharding, the tokenizer, and the statistics of the weights (read back with the tests' own
// dequantizer from test_util.h).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint_fixture.h"
#include "exactq/checkpoint_writer.h"
#include "exactq/model.h"

namespace exactq::test {
namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Mean and standard deviation of a quantized matrix's values, dequantized here (scale * q + bias).
std::pair<double, double> moments(const QuantizedMatrixView& q) {
  double sum = 0, sum2 = 0;
  const std::int64_t row_bytes = q.k * q.bits / 8;
  for (std::int64_t r = 0; r < q.n; ++r)
    for (std::int64_t c = 0; c < q.k; ++c) {
      const std::size_t g = std::size_t(r * (q.k / q.group) + c / q.group);
      const double w = double(ref_load(q.scales.data(), g, q.dtype)) * ref_unpack(q.packed.data() + r * row_bytes, c, q.bits) +
                       double(ref_load(q.biases.data(), g, q.dtype));
      sum += w;
      sum2 += w * w;
    }
  const double n = double(q.n * q.k), mean = sum / n;
  return {mean, std::sqrt(sum2 / n - mean * mean)};
}

double dense_mean(const DenseView& v) {
  double s = 0;
  const std::size_t n = v.bytes.size() / ref_size(v.dtype);
  for (std::size_t i = 0; i < n; ++i) s += ref_load(v.bytes.data(), i, v.dtype);
  return s / double(n);
}

class MakeModelArch : public ::testing::TestWithParam<std::string> {};

TEST_P(MakeModelArch, RoundTripsThroughTheLoader) {
  const std::uint64_t seed = fresh_seed() % 1000000;
  SCOPED_TRACE(seed_note(seed));
  MakeModelOptions o;
  o.arch = GetParam();
  o.seed = seed;
  TempDir dir;
  const MakeModelResult r = make_model(o, (dir.path / "m").string());
  const Checkpoint c = Checkpoint::open((dir.path / "m").string());
  const ModelConfig& cfg = c.config();
  EXPECT_EQ(cfg.arch, o.arch == "llama" ? Arch::llama : o.arch == "qwen3" ? Arch::qwen3 : Arch::gemma3);
  EXPECT_EQ(cfg.num_layers, 2);
  EXPECT_EQ(c.tied(), o.arch == "gemma3");
  EXPECT_EQ(c.dtype(), DType::bf16);
  EXPECT_TRUE(c.unknown_tensors().empty());
  std::int64_t params = 0;
  for (const LinearView* l : c.linears()) {
    ASSERT_TRUE(l->quantized) << l->path;
    EXPECT_EQ(l->q.bits, 4);
    EXPECT_EQ(l->q.group, 64);
    params += l->n * l->k;
  }
  EXPECT_GT(r.parameters, params);  // plus the norms
  // What was written is what the plan says, tensor for tensor.
  const auto plan = make_model_plan(o);
  const SafetensorsFile file((dir.path / "m" / "model.safetensors").string());
  ASSERT_EQ(file.header().tensors.size(), plan.size());
  for (const auto& p : plan) {
    const TensorInfo* t = file.header().find(p.name);
    ASSERT_NE(t, nullptr) << p.name;
    EXPECT_EQ(t->dtype, p.dtype) << p.name;
    EXPECT_EQ(t->shape, p.shape) << p.name;
  }
  EXPECT_EQ(file.header().metadata.at("format"), "mlx");

  // Statistics: projections N(0, 0.02); the residual writers smaller by sqrt(2 * layers) = 2;
  // norms near 1 (gemma3 stores weight - 1, near 0). Bounds leave room for 4-bit rounding.
  const auto [qm, qs] = moments(c.layers()[0].q_proj.q);
  EXPECT_NEAR(qm, 0.0, 0.002);
  EXPECT_NEAR(qs, 0.02, 0.003);
  EXPECT_NEAR(moments(c.layers()[1].down_proj.q).second, 0.01, 0.0015);
  EXPECT_NEAR(dense_mean(c.final_norm()), o.arch == "gemma3" ? 0.0 : 1.0, 0.01);

  // The tokenizer holds exactly vocab_size tokens, ids 0..V-1 once each, every merge's parts
  // and result are tokens, and config.json's special ids are its added tokens.
  const auto tok = nlohmann::json::parse(read_all(dir.path / "m" / "tokenizer.json"));
  const auto& vocab = tok["model"]["vocab"];
  EXPECT_EQ(std::int64_t(vocab.size()), cfg.vocab_size);
  std::set<std::int64_t> ids;
  for (const auto& [token, id] : vocab.items()) ids.insert(id.get<std::int64_t>());
  EXPECT_EQ(std::int64_t(ids.size()), cfg.vocab_size);
  EXPECT_EQ(*ids.rbegin(), cfg.vocab_size - 1);
  for (const auto& m : tok["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    const auto space = s.find(' ');
    ASSERT_NE(space, std::string::npos);
    EXPECT_TRUE(vocab.contains(s.substr(0, space)) && vocab.contains(s.substr(space + 1)) &&
                vocab.contains(s.substr(0, space) + s.substr(space + 1)))
        << s;
  }
  const auto config = nlohmann::json::parse(read_all(dir.path / "m" / "config.json"));
  EXPECT_EQ(tok["added_tokens"][1]["id"], config["eos_token_id"]);
}

INSTANTIATE_TEST_SUITE_P(All, MakeModelArch, ::testing::Values("llama", "qwen3", "gemma3"));

TEST(MakeModel, SameSeedSameBytesWhateverTheThreads) {
  const std::uint64_t seed = fresh_seed() % 1000000;
  SCOPED_TRACE(seed_note(seed));
  TempDir dir;
  MakeModelOptions o;
  o.arch = "qwen3";
  o.seed = seed;
  o.threads = 1;
  make_model(o, (dir.path / "a").string());
  o.threads = 3;
  make_model(o, (dir.path / "b").string());
  o.seed = seed + 1;
  make_model(o, (dir.path / "c").string());
  for (const char* f : {"model.safetensors", "model.safetensors.index.json", "config.json", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(read_all(dir.path / "a" / f), read_all(dir.path / "b" / f)) << f;
  EXPECT_NE(read_all(dir.path / "a" / "model.safetensors"), read_all(dir.path / "c" / "model.safetensors"));
}

TEST(MakeModel, ShardsLikeMlxLm) {
  TempDir dir;
  MakeModelOptions o;
  o.max_shard_bytes = 300000;  // the tiny llama's ~0.96 MB in 4 shards
  const MakeModelResult r = make_model(o, (dir.path / "m").string());
  ASSERT_GE(r.files.size(), 3u);
  for (std::size_t i = 0; i < r.files.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, r.files.size());
    EXPECT_EQ(r.files[i], name);
    const SafetensorsFile f((dir.path / "m" / name).string());
    std::uint64_t data = 0;
    for (const auto& t : f.header().tensors) data += t.nbytes();
    EXPECT_LE(data, o.max_shard_bytes) << name;
  }
  const Checkpoint c = Checkpoint::open((dir.path / "m").string());
  EXPECT_EQ(c.files().size(), r.files.size());
  const auto index = nlohmann::json::parse(read_all(dir.path / "m" / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_parameters"], r.parameters);
}

TEST(MakeModel, RefusesBadOptions) {
  TempDir dir;
  MakeModelOptions o;
  o.arch = "gpt2";
  expect_invalid([&] { make_model(o, (dir.path / "x").string()); }, "gpt2");
  o = {};
  o.shape = "huge";
  expect_invalid([&] { make_model(o, (dir.path / "x").string()); }, "huge");
  o = {};
  o.bits = 7;
  expect_invalid([&] { make_model(o, (dir.path / "x").string()); }, "7");
  o = {};
  make_model(o, (dir.path / "full").string());
  expect_invalid([&] { make_model(o, (dir.path / "full").string()); }, "not empty");
}

}  // namespace
}  // namespace exactq::test
