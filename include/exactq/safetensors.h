// safetensors files: the header parser, memory-mapped reading, and a writer.
//
// A file is a little-endian u64 header length L, L bytes of JSON
// `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}`, then the
// data; offsets count from the first data byte. The parser refuses anything a reader could
// misread: every check of parse_safetensors_header names the file, the tensor and the value, and
// nothing is ever read outside the bytes it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "exactq/dtype.h"

namespace exactq {

// Every refusal of a malformed checkpoint: the message names the file, the tensor (or config
// field) and the offending value. An std::invalid_argument, so the CLI exits 2 on it.
class CheckpointError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The safetensors element types (the format's full list; exactq computes with U32 codes and
// F32/F16/BF16 values, the rest can only be read and reported).
enum class StDType : std::uint8_t { BOOL, U8, I8, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64 };
std::size_t st_dtype_size(StDType t);
std::string_view to_string(StDType t);
// "F16" etc.; false for an unknown name.
bool parse_st_dtype(std::string_view text, StDType& out);
// The float dtypes map onto exactq's DType; false for the others.
bool to_dtype(StDType t, DType& out);
StDType to_st_dtype(DType t);

struct TensorInfo {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // data_offsets, relative to the first data byte
  std::uint64_t end = 0;
  std::uint64_t nbytes() const { return end - begin; }
  std::int64_t elements() const;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in data order (ascending begin)
  std::map<std::string, std::string> metadata;
  std::uint64_t data_offset = 0;  // 8 + header length
  const TensorInfo* find(std::string_view name) const;
};

// A header larger than this is refused before any allocation (the reference implementation's
// limit; a 100 MB header would describe millions of tensors).
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
// Dimensions per tensor and elements per dimension accepted by the parser.
inline constexpr std::size_t kMaxRank = 8;

// Parses and checks the header of a whole file given as bytes (`file` names it in errors).
// Throws CheckpointError on: a file shorter than 8 bytes, a header length past the file or over
// kMaxHeaderBytes, JSON that is malformed, not UTF-8 or not an object, a repeated tensor name, a
// tensor entry that is not {dtype, shape, data_offsets}, an unknown dtype, a negative or
// overflowing shape, offsets that are not increasing, outside the data, overlapping or leaving a
// hole, a byte span that is not shape x dtype size, or metadata that is not string to string.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file, const std::string& name);

// A read-only memory map of a whole file (POSIX mmap); the bytes live as long as the object.
class MappedFile {
 public:
  // Throws CheckpointError naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// One mapped safetensors file with its checked header; tensor bytes are views into the map.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::string& path() const { return file_->path(); }
  const SafetensorsHeader& header() const { return header_; }
  std::uint64_t file_bytes() const { return file_->bytes().size(); }
  // The tensor's bytes (checked inside the file by the parser).
  std::span<const std::byte> data(const TensorInfo& t) const;

 private:
  std::shared_ptr<MappedFile> file_;
  SafetensorsHeader header_;
};

// A tensor to write: its bytes are copied into the file in the order given.
struct TensorToWrite {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;
};

// The bytes of a safetensors file holding `tensors` in the order given: the header's keys sorted
// (nlohmann's object order), padded with spaces to a multiple of 8 bytes so that the data start
// is 8-byte aligned. Deterministic: the same input gives the same bytes. Throws CheckpointError
// when a tensor's bytes do not match its shape and dtype or a name repeats.
std::vector<std::byte> safetensors_bytes(const std::vector<const TensorToWrite*>& tensors,
                                         const std::map<std::string, std::string>& metadata);
// The same bytes streamed to `path` (no copy of the data is made); throws std::runtime_error
// naming the path when it cannot be written.
void write_safetensors(const std::string& path, const std::vector<const TensorToWrite*>& tensors,
                       const std::map<std::string, std::string>& metadata);
// Writes bytes or text to `path`; throws std::runtime_error naming the path when it cannot.
void write_file(const std::string& path, std::span<const std::byte> bytes);
void write_file(const std::string& path, std::string_view text);

}  // namespace exactq
