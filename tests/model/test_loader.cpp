// The loader over model directories built by checkpoint_fixture.h: every architecture loads with
// views onto the very bytes written, and each malformed kind is refused naming the file, the
// tensor and the value, starting from a fixture that loads (the positive control).
#include <gtest/gtest.h>

#include <cstring>

#include "checkpoint_fixture.h"
#include "exactq/model.h"

namespace exactq::test {
namespace {

void expect_refused(const fs::path& dir, std::initializer_list<std::string> needles, LoadOptions o = {}) {
  try {
    Checkpoint::open(dir.string(), o);
    ADD_FAILURE() << "loaded a malformed checkpoint";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(dir.string()), std::string::npos) << m;
    for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' not in: " << m;
  }
}

bool same_bytes(std::span<const std::byte> view, const std::vector<std::byte>& written) {
  return view.size() == written.size() && std::memcmp(view.data(), written.data(), view.size()) == 0;
}

// Loads `f` from a fresh directory (valid: the positive control), then writes `broken` (f after
// `change`) to another and expects the refusal.
template <typename Change>
void expect_change_refused(const Fixture& f, Change change, std::initializer_list<std::string> needles, int shards = 1) {
  TempDir good, bad;
  write_fixture(good.path, f, shards);
  ASSERT_NO_THROW(Checkpoint::open(good.path.string()));
  Fixture broken = f;
  change(broken);
  write_fixture(bad.path, broken, shards);
  expect_refused(bad.path, needles);
}

class LoaderArch : public ::testing::TestWithParam<std::string> {};

TEST_P(LoaderArch, LoadsViewsOfTheWrittenBytes) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (const bool tied : {false, true}) {
    Tiny s;
    s.model_type = GetParam();
    s.tied = tied;
    Fixture f = tiny_fixture(s, rng);
    TempDir dir;
    write_fixture(dir.path, f, tied ? 1 : 3);
    const Checkpoint c = Checkpoint::open(dir.path.string());
    EXPECT_EQ(c.tied(), tied);
    EXPECT_EQ(c.dtype(), DType::bf16);
    ASSERT_EQ(c.layers().size(), 2u);
    EXPECT_EQ(c.files().size(), tied ? 1u : 3u);
    EXPECT_TRUE(c.unknown_tensors().empty());
    const std::string& p = f.prefix;
    const auto& e = c.embed_tokens();
    ASSERT_TRUE(e.quantized);
    EXPECT_EQ(e.q.n, 320);
    EXPECT_EQ(e.q.k, 128);
    Fixture& g = f;
    EXPECT_TRUE(same_bytes(std::as_bytes(e.q.packed), g.at(p + "model.embed_tokens.weight").data));
    EXPECT_TRUE(same_bytes(e.q.scales, g.at(p + "model.embed_tokens.scales").data));
    const auto& down = c.layers()[1].down_proj;
    EXPECT_EQ(down.n, 128);
    EXPECT_EQ(down.k, 192);
    EXPECT_TRUE(same_bytes(down.q.biases, g.at(p + "model.layers.1.mlp.down_proj.biases").data));
    EXPECT_TRUE(same_bytes(c.final_norm().bytes, g.at(p + "model.norm.weight").data));
    if (tied) EXPECT_EQ(&c.lm_head(), &c.embed_tokens());
    else EXPECT_TRUE(same_bytes(std::as_bytes(c.lm_head().q.packed), g.at(p + "lm_head.weight").data));
    EXPECT_EQ(c.layers()[0].q_norm.has_value(), s.model_type == "qwen3" || s.model_type.starts_with("gemma3"));
    EXPECT_EQ(c.layers()[0].q_proj.bias.has_value(), s.model_type == "qwen2");
    EXPECT_EQ(c.layers()[0].pre_feedforward_norm.has_value(), s.model_type.starts_with("gemma3"));
    EXPECT_EQ(c.linears().size(), 1 + 2 * 7 + (tied ? 0u : 1u));
  }
}

INSTANTIATE_TEST_SUITE_P(All, LoaderArch, ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma3_text", "gemma3"));

Fixture valid(const std::string& type = "llama") {
  static std::mt19937_64 rng(fresh_seed());
  Tiny s;
  s.model_type = type;
  return tiny_fixture(s, rng);
}

TEST(Loader, RefusesMissingTensor) {
  expect_change_refused(valid(), [](Fixture& f) { f.erase("model.layers.1.mlp.up_proj.weight"); },
                        {"model.layers.1.mlp.up_proj.weight", "missing"});
  expect_change_refused(valid("qwen3"), [](Fixture& f) { f.erase("model.layers.0.self_attn.k_norm.weight"); },
                        {"model.layers.0.self_attn.k_norm.weight", "missing"});
  expect_change_refused(valid(), [](Fixture& f) { f.erase("lm_head.weight"), f.erase("lm_head.scales"), f.erase("lm_head.biases"); },
                        {"lm_head.weight", "missing"});
}

TEST(Loader, RefusesWrongShape) {
  expect_change_refused(valid(), [](Fixture& f) {
    auto& t = f.at("model.layers.0.self_attn.k_proj.scales");
    t.shape = {32, 2};
    t.data.resize(32 * 2 * 2);
  }, {"model.layers.0.self_attn.k_proj.scales", "[32, 2]", "[64, 2]"});
  expect_change_refused(valid(), [](Fixture& f) {
    auto& t = f.at("model.norm.weight");
    t.shape = {127};
    t.data.resize(254);
  }, {"model.norm.weight", "[127]", "[128]"});
}

TEST(Loader, RefusesWrongDtype) {
  expect_change_refused(valid(), [](Fixture& f) {
    auto& t = f.at("model.layers.1.input_layernorm.weight");
    t.dtype = StDType::F16;  // same bytes, another dtype: a silently wrong model if accepted
  }, {"model.layers.1.input_layernorm.weight", "F16", "BF16"});
  expect_change_refused(valid(), [](Fixture& f) {
    auto& t = f.at("model.layers.0.mlp.gate_proj.weight");
    t.dtype = StDType::I32;
  }, {"model.layers.0.mlp.gate_proj.weight", "I32", "U32"});
}

TEST(Loader, RefusesQuantizedModuleWithoutScalesOrBiases) {
  expect_change_refused(valid(), [](Fixture& f) { f.erase("model.layers.0.self_attn.o_proj.scales"); },
                        {"model.layers.0.self_attn.o_proj.weight", "U32", "scales"});
  expect_change_refused(valid(), [](Fixture& f) { f.erase("model.layers.1.mlp.down_proj.biases"); },
                        {"model.layers.1.mlp.down_proj.biases", "missing"});
}

TEST(Loader, RefusesBitsOrGroupNotMatchingTheData) {
  // Data packed at 4 bits, group 64; config claims 8 bits (a supported width, so only the
  // shapes can tell).
  expect_change_refused(valid(), [](Fixture& f) { f.config["quantization"]["bits"] = 8, f.config["quantization_config"]["bits"] = 8; },
                        {"model.embed_tokens.weight", "[320, 32]", "[320, 16]"});
  expect_change_refused(valid(), [](Fixture& f) { f.config["quantization"]["bits"] = 7, f.config["quantization_config"]["bits"] = 7; },
                        {"config.json", "bits 7"});
  expect_change_refused(valid(), [](Fixture& f) {
    f.config["quantization"]["model.layers.0.mlp.down_proj"] = {{"group_size", 128}};
    f.config["quantization_config"] = f.config["quantization"];
  }, {"model.layers.0.mlp.down_proj", "group 128", "192"});
}

TEST(Loader, RefusesScalesTheConfigDoesNotExplain) {
  expect_change_refused(valid(), [](Fixture& f) { f.config.erase("quantization"), f.config.erase("quantization_config"); },
                        {"model.embed_tokens.scales", "no quantization"});
  expect_change_refused(valid(), [](Fixture& f) {
    f.config["quantization"]["lm_head"] = false;
    f.config["quantization_config"] = f.config["quantization"];
  }, {"lm_head", "not quantized"});
}

TEST(Loader, RefusesStrayScalesOfAnUnquantizedModuleEvenWhenNotStrict) {
  // lm_head stored dense, as `false` in the config says, but its old scales and biases left in.
  Fixture f = valid();
  f.config["quantization"]["lm_head"] = false;
  f.config["quantization_config"] = f.config["quantization"];
  std::mt19937_64 rng(fresh_seed());
  auto& w = f.at("lm_head.weight");
  w.dtype = StDType::BF16;
  w.shape = {320, 128};
  w.data = random_floats(320 * 128, DType::bf16, 0.0f, 0.05f, rng);
  TempDir good, bad;
  Fixture clean = f;
  clean.erase("lm_head.scales");
  clean.erase("lm_head.biases");
  write_fixture(good.path, clean);
  const Checkpoint c = Checkpoint::open(good.path.string());
  EXPECT_FALSE(c.lm_head().quantized);
  write_fixture(bad.path, f);
  expect_refused(bad.path, {"lm_head.scales", "says false"}, LoadOptions{.strict = false});
}

TEST(Loader, RefusesTiedHeadThatIsPresent) {
  expect_change_refused(valid(), [](Fixture& f) { f.config["tie_word_embeddings"] = true; },
                        {"lm_head.weight", "tie_word_embeddings"});
}

TEST(Loader, ReportsUnknownTensors) {
  Fixture f = valid();
  expect_change_refused(f, [](Fixture& g) { g.tensors.push_back({"model.layers.0.mlp.extra.weight", StDType::BF16, {2}, std::vector<std::byte>(4)}); },
                        {"model.layers.0.mlp.extra.weight", "1 unknown"});
  f.tensors.push_back({"model.layers.0.mlp.extra.weight", StDType::BF16, {2}, std::vector<std::byte>(4)});
  TempDir dir;
  write_fixture(dir.path, f);
  const Checkpoint c = Checkpoint::open(dir.path.string(), LoadOptions{.strict = false});
  EXPECT_EQ(c.unknown_tensors(), std::vector<std::string>{"model.layers.0.mlp.extra.weight"});
}

TEST(Loader, IgnoresTheVisionTowerOfGemma3) {
  Fixture f = valid("gemma3");
  f.tensors.push_back({"vision_tower.vision_model.post_layernorm.weight", StDType::BF16, {4}, std::vector<std::byte>(8)});
  f.tensors.push_back({"multi_modal_projector.mm_soft_emb_norm.weight", StDType::BF16, {4}, std::vector<std::byte>(8)});
  TempDir dir;
  write_fixture(dir.path, f, 2);
  const Checkpoint c = Checkpoint::open(dir.path.string());
  EXPECT_EQ(c.ignored_tensors().size(), 2u);
  // Without the nesting there is no vision tower to drop: the same tensor is unknown.
  Fixture g = valid("gemma3_text");
  g.tensors.push_back({"vision_tower.vision_model.post_layernorm.weight", StDType::BF16, {4}, std::vector<std::byte>(8)});
  TempDir other;
  write_fixture(other.path, g);
  expect_refused(other.path, {"vision_tower.vision_model.post_layernorm.weight", "unknown"});
}

TEST(Loader, RefusesMissingShardAndBrokenIndex) {
  const Fixture f = valid();
  TempDir dir;
  write_fixture(dir.path, f, 3);
  ASSERT_NO_THROW(Checkpoint::open(dir.path.string()));
  fs::rename(dir.path / "model-00002-of-00003.safetensors", dir.path / "moved");
  expect_refused(dir.path, {"model-00002-of-00003.safetensors", "missing"});
  fs::rename(dir.path / "moved", dir.path / "model-00002-of-00003.safetensors");
  ASSERT_NO_THROW(Checkpoint::open(dir.path.string()));

  const fs::path index = dir.path / "model.safetensors.index.json";
  const std::string text = [&] { std::ifstream in(index); return std::string(std::istreambuf_iterator<char>(in), {}); }();
  auto j = nlohmann::json::parse(text);
  // A tensor the index maps to a shard that does not hold it.
  j["weight_map"]["model.norm.weight"] = j["weight_map"]["model.norm.weight"] == "model-00001-of-00003.safetensors"
                                             ? "model-00002-of-00003.safetensors" : "model-00001-of-00003.safetensors";
  write_text(index, j.dump());
  expect_refused(dir.path, {"model.norm.weight", "index maps it"});
  // A path outside the directory.
  j = nlohmann::json::parse(text);
  j["weight_map"]["model.norm.weight"] = "../model-00001-of-00003.safetensors";
  write_text(index, j.dump());
  expect_refused(dir.path, {"model.norm.weight", "not a file name"});
  // Shards without an index.
  fs::remove(index);
  expect_refused(dir.path, {"model.safetensors.index.json", "missing"});
}

TEST(Loader, RefusesTensorInTwoShards) {
  const Fixture f = valid();
  TempDir dir;
  write_fixture(dir.path, f, 2);
  ASSERT_NO_THROW(Checkpoint::open(dir.path.string()));
  // Shard 2 rewritten with a copy of a tensor that shard 1 holds.
  const SafetensorsFile one((dir.path / "model-00001-of-00002.safetensors").string());
  const SafetensorsFile two((dir.path / "model-00002-of-00002.safetensors").string());
  std::vector<TensorToWrite> copies;
  for (const auto& info : two.header().tensors) {
    const auto d = two.data(info);
    copies.push_back({info.name, info.dtype, info.shape, {d.begin(), d.end()}});
  }
  const TensorInfo& stolen = one.header().tensors.front();
  copies.push_back({stolen.name, stolen.dtype, stolen.shape, {one.data(stolen).begin(), one.data(stolen).end()}});
  std::vector<const TensorToWrite*> ptrs;
  for (const auto& t : copies) ptrs.push_back(&t);
  const auto bytes = safetensors_bytes(ptrs, {});
  write_file((dir.path / "model-00002-of-00002.safetensors").string(), bytes);
  expect_refused(dir.path, {stolen.name, "also in", "model-0000"});
}

TEST(Loader, RefusesMalformedShardAndMissingConfig) {
  TempDir dir;
  write_fixture(dir.path, valid());
  ASSERT_NO_THROW(Checkpoint::open(dir.path.string()));
  {
    std::fstream f(dir.path / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    const char huge[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    f.write(huge, 8);
  }
  expect_refused(dir.path, {"model.safetensors", "header length"});
  fs::remove(dir.path / "config.json");
  expect_refused(dir.path, {"config.json", "missing"});
}

}  // namespace
}  // namespace exactq::test
