// Memory-mapped safetensors reading and the deterministic writer.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exactq/safetensors.h"
#include "model/text.h"

namespace exactq {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) checkpoint_fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    checkpoint_fail(path, "is not a regular file");
  }
  size_ = std::size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      checkpoint_fail(path, fmt::format("cannot be memory-mapped: {}", std::strerror(err)));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file's pages reachable
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_shared<MappedFile>(path)), header_(parse_safetensors_header(file_->bytes(), path)) {}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& t) const {
  return file_->bytes().subspan(std::size_t(header_.data_offset + t.begin), std::size_t(t.nbytes()));
}

namespace {

// The 8-byte length and the padded JSON header for `tensors` laid out in the order given.
std::string header_block(const std::vector<const TensorToWrite*>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t at = 0;
  std::set<std::string> names;
  for (const TensorToWrite* t : tensors) {
    std::uint64_t need = st_dtype_size(t->dtype);
    for (auto d : t->shape) need *= std::uint64_t(d);
    if (need != t->data.size())
      checkpoint_fail(t->name, fmt::format("{} bytes given for shape x {} needing {}", t->data.size(), to_string(t->dtype), need));
    if (!names.insert(t->name).second || t->name == "__metadata__") checkpoint_fail(t->name, "tensor name repeated");
    header[t->name] = {{"dtype", std::string(to_string(t->dtype))}, {"shape", t->shape}, {"data_offsets", {at, at + need}}};
    at += need;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string block(8, '\0');
  for (int i = 0; i < 8; ++i) block[std::size_t(i)] = char((text.size() >> (8 * i)) & 0xff);
  return block + text;
}

}  // namespace

std::vector<std::byte> safetensors_bytes(const std::vector<const TensorToWrite*>& tensors,
                                         const std::map<std::string, std::string>& metadata) {
  const std::string head = header_block(tensors, metadata);
  std::vector<std::byte> out(reinterpret_cast<const std::byte*>(head.data()),
                             reinterpret_cast<const std::byte*>(head.data()) + head.size());
  for (const TensorToWrite* t : tensors) out.insert(out.end(), t->data.begin(), t->data.end());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<const TensorToWrite*>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string head = header_block(tensors, metadata);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error(fmt::format("cannot write '{}'", path));
  f.write(head.data(), std::streamsize(head.size()));
  for (const TensorToWrite* t : tensors) f.write(reinterpret_cast<const char*>(t->data.data()), std::streamsize(t->data.size()));
  if (!f) throw std::runtime_error(fmt::format("writing '{}' failed", path));
}

void write_file(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error(fmt::format("cannot write '{}'", path));
  f.write(text.data(), std::streamsize(text.size()));
  if (!f) throw std::runtime_error(fmt::format("writing '{}' failed", path));
}

void write_file(const std::string& path, std::span<const std::byte> bytes) {
  write_file(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace exactq
