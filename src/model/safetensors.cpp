// The safetensors header parser: every byte of the header is checked before any tensor is
// handed out, and every error names the file, the tensor and the value.
#include "exactq/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/text.h"

namespace exactq {

namespace {

using nlohmann::json;

struct DTypeName {
  StDType t;
  std::string_view name;
  std::size_t size;
};
constexpr std::array<DTypeName, 13> kDTypes = {{{StDType::BOOL, "BOOL", 1},
                                                {StDType::U8, "U8", 1},
                                                {StDType::I8, "I8", 1},
                                                {StDType::U16, "U16", 2},
                                                {StDType::I16, "I16", 2},
                                                {StDType::F16, "F16", 2},
                                                {StDType::BF16, "BF16", 2},
                                                {StDType::U32, "U32", 4},
                                                {StDType::I32, "I32", 4},
                                                {StDType::F32, "F32", 4},
                                                {StDType::U64, "U64", 8},
                                                {StDType::I64, "I64", 8},
                                                {StDType::F64, "F64", 8}}};

// The header's JSON may nest no deeper than {tensor: {shape: [dims]}}.
constexpr int kMaxJsonDepth = 3;

std::uint64_t read_u64_le(std::span<const std::byte> b) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::uint64_t(b[std::size_t(i)]);
  return v;
}

}  // namespace

std::size_t st_dtype_size(StDType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d.size;
  return 0;
}
std::string_view to_string(StDType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d.name;
  return "?";
}
bool parse_st_dtype(std::string_view text, StDType& out) {
  for (const auto& d : kDTypes)
    if (d.name == text) {
      out = d.t;
      return true;
    }
  return false;
}
bool to_dtype(StDType t, DType& out) {
  if (t == StDType::F32) out = DType::f32;
  else if (t == StDType::F16) out = DType::f16;
  else if (t == StDType::BF16) out = DType::bf16;
  else return false;
  return true;
}
StDType to_st_dtype(DType t) {
  return t == DType::f32 ? StDType::F32 : t == DType::f16 ? StDType::F16 : StDType::BF16;
}

std::int64_t TensorInfo::elements() const {
  std::int64_t e = 1;
  for (auto d : shape) e *= d;
  return e;
}

const TensorInfo* SafetensorsHeader::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file, const std::string& name) {
  auto fail = [&](const std::string& what) { checkpoint_fail(name, what); };
  if (file.size() < 8) fail(fmt::format("file of {} bytes is shorter than the 8-byte header length", file.size()));
  const std::uint64_t header_len = read_u64_le(file.first(8));
  if (header_len > kMaxHeaderBytes)
    fail(fmt::format("header length {} is over the limit of {} bytes", header_len, kMaxHeaderBytes));
  if (header_len > file.size() - 8)
    fail(fmt::format("header length {} runs past the end of the file ({} bytes after the length)", header_len,
                     file.size() - 8));
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, std::size_t(header_len));
  if (text.empty() || text.front() != '{') fail("header does not start with '{' (not a safetensors JSON header)");

  json root;
  try {
    root = parse_json_strict(text, kMaxJsonDepth);
  } catch (const JsonRefused& e) {
    fail(fmt::format("header is not valid: {}", e.what()));
  }
  if (!root.is_object()) fail("header JSON is not an object");

  SafetensorsHeader h;
  h.data_offset = 8 + header_len;
  const std::uint64_t data_size = file.size() - h.data_offset;
  for (const auto& [key, value] : root.items()) {
    const std::string tensor = printable(key);
    if (key == "__metadata__") {
      if (!value.is_object()) fail("__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail(fmt::format("__metadata__ value of '{}' is not a string", printable(mk)));
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) fail(fmt::format("tensor '{}': entry is not an object", tensor));
    for (const auto& [field, _] : value.items())
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        fail(fmt::format("tensor '{}': unknown field '{}'", tensor, printable(field)));
    TensorInfo t;
    t.name = key;
    const auto dt = value.find("dtype");
    if (dt == value.end() || !dt->is_string()) fail(fmt::format("tensor '{}': dtype missing or not a string", tensor));
    if (!parse_st_dtype(dt->get_ref<const std::string&>(), t.dtype))
      fail(fmt::format("tensor '{}': unknown dtype '{}'", tensor, printable(dt->get_ref<const std::string&>())));
    const auto shape = value.find("shape");
    if (shape == value.end() || !shape->is_array()) fail(fmt::format("tensor '{}': shape missing or not an array", tensor));
    if (shape->size() > kMaxRank) fail(fmt::format("tensor '{}': rank {} is over {}", tensor, shape->size(), kMaxRank));
    // Byte count, saturating at 2^65 (so the next product of a dimension <= 2^53 cannot wrap):
    // a count past the data size is refused below either way.
    constexpr unsigned __int128 kSaturated = (unsigned __int128)(1) << 65;
    unsigned __int128 bytes = st_dtype_size(t.dtype);
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) fail(fmt::format("tensor '{}': shape entry {} is not a non-negative integer", tensor, printable(d.dump())));
      const std::uint64_t v = d.get<std::uint64_t>();
      if (v > (std::uint64_t(1) << 53)) fail(fmt::format("tensor '{}': dimension {} is absurdly large", tensor, v));
      t.shape.push_back(std::int64_t(v));
      bytes = std::min<unsigned __int128>(bytes * v, kSaturated);
    }
    const auto off = value.find("data_offsets");
    if (off == value.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail(fmt::format("tensor '{}': data_offsets is not two non-negative integers", tensor));
    t.begin = (*off)[0].get<std::uint64_t>();
    t.end = (*off)[1].get<std::uint64_t>();
    if (t.begin > t.end) fail(fmt::format("tensor '{}': data_offsets [{}, {}] decrease", tensor, t.begin, t.end));
    if (t.end > data_size)
      fail(fmt::format("tensor '{}': data_offsets [{}, {}] end past the data ({} bytes)", tensor, t.begin, t.end, data_size));
    if (bytes != t.end - t.begin)
      fail(fmt::format("tensor '{}': shape {} x {} ({} bytes each) needs {} bytes but data_offsets span {}", tensor,
                       shape->dump(), to_string(t.dtype), st_dtype_size(t.dtype),
                       bytes >= kSaturated ? std::string("over 2^64") : fmt::format("{}", std::uint64_t(bytes)),
                       t.end - t.begin));
    h.tensors.push_back(std::move(t));
  }
  // The data must be covered exactly once: sorted by offset, each tensor starts where the
  // previous one ended (an overlap would alias two tensors, a hole or tail would be bytes no
  // tensor accounts for).
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t at = 0;
  const TensorInfo* previous = nullptr;
  for (const auto& t : h.tensors) {
    if (t.begin < at)
      fail(fmt::format("tensor '{}': data_offsets [{}, {}] overlap tensor '{}' [{}, {}]", printable(t.name), t.begin, t.end,
                       printable(previous->name), previous->begin, previous->end));
    if (t.begin > at)
      fail(fmt::format("tensor '{}': data_offsets [{}, {}] leave a hole of {} bytes before it", printable(t.name), t.begin,
                       t.end, t.begin - at));
    at = t.end;
    previous = &t;
  }
  if (at != data_size)
    fail(fmt::format("{} bytes after the last tensor's data ({} of {} data bytes used)", data_size - at, at, data_size));
  return h;
}

}  // namespace exactq
