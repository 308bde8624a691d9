// Reading .safetensors: memory-map the file, validate the header against the file size (dtypes, shapes, offsets,
// overlaps, truncation, trailing bytes) before any tensor is touched; exact widening of F16/BF16/F32 to float.
// Format facts from the safetensors specification (huggingface/safetensors README, "Format").
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "kvconf/engine/error.hpp"
#include "kvconf/engine/safetensors.hpp"

namespace kvconf::engine {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts unsupported");

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::f16:
      return "F16";
    case Dtype::bf16:
      return "BF16";
    case Dtype::f32:
      return "F32";
  }
  return "?";
}

std::size_t dtype_size(Dtype d) { return d == Dtype::f32 ? 4 : 2; }

std::size_t TensorView::numel() const {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  return n;
}

namespace {

// IEEE binary16 bits → float, exactly (every fp16 value, subnormals, ±inf and NaN payloads included).
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h >> 15) << 31;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    const float mag = std::ldexp(static_cast<float>(man), -24);  // subnormal or zero: man · 2^-24, exact
    return sign ? -mag : mag;
  }
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

std::uint16_t load16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

std::vector<float> TensorView::to_float() const {
  const std::size_t n = numel();
  std::vector<float> out(n);
  const std::byte* p = bytes.data();
  switch (dtype) {
    case Dtype::f32:
      if (n > 0) std::memcpy(out.data(), p, n * 4);
      break;
    case Dtype::f16:
      for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(load16(p + 2 * i));
      break;
    case Dtype::bf16:
      for (std::size_t i = 0; i < n; ++i)
        out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(load16(p + 2 * i)) << 16);
      break;
  }
  return out;
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

namespace {

using nlohmann::json;

// The file mapped read-only, after checking it is a regular file of at least the 8-byte header length.
struct Mapping {
  void* data = nullptr;
  std::size_t size = 0;
};

Mapping map_file(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(file, "", std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(file, "", "not a regular file");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(file, "header", "file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (m == MAP_FAILED) fail(file, "", std::string("mmap failed: ") + std::strerror(map_errno));
  return {m, size};
}

// The JSON header (an object) and where the data starts: 8 + its length.
std::pair<json, std::size_t> read_header(const std::string& file, const std::byte* base, std::size_t size) {
  std::uint64_t n_header = 0;
  std::memcpy(&n_header, base, 8);
  if (n_header > size - 8)
    fail(file, "header",
         "header length " + std::to_string(n_header) + " runs past the end of the file (" + std::to_string(size) +
             " bytes)");
  const std::string_view text(reinterpret_cast<const char*>(base + 8), static_cast<std::size_t>(n_header));
  json h;
  try {
    h = json::parse(text);
  } catch (const json::exception& e) {
    fail(file, "header", std::string("invalid JSON: ") + e.what());
  }
  if (!h.is_object()) fail(file, "header", "expected a JSON object");
  return {std::move(h), 8 + static_cast<std::size_t>(n_header)};
}

std::map<std::string, std::string> read_metadata(const std::string& file, const json& t) {
  if (!t.is_object()) fail(file, "__metadata__", "expected an object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto& [k, v] : t.items()) {
    if (!v.is_string()) fail(file, "__metadata__", "value of \"" + k + "\" is not a string");
    metadata[k] = v.get<std::string>();
  }
  return metadata;
}

Dtype read_dtype(const std::string& file, const std::string& name, const json& t) {
  if (!t.contains("dtype") || !t["dtype"].is_string()) fail(file, name, "missing or non-string dtype");
  const std::string dt = t["dtype"].get<std::string>();
  if (dt == "F16") return Dtype::f16;
  if (dt == "BF16") return Dtype::bf16;
  if (dt == "F32") return Dtype::f32;
  fail(file, name, "dtype " + dt + " not supported (expected F16, BF16 or F32)");
}

// One tensor's entry: its view (bytes not yet set) and its data_offsets [begin, end), checked against its shape.
struct Entry {
  TensorView view;
  std::size_t begin = 0, end = 0;
};

Entry read_entry(const std::string& file, const std::string& name, const json& t) {
  if (!t.is_object()) fail(file, name, "expected an object with dtype, shape and data_offsets");
  Entry e;
  TensorView& v = e.view;
  v.name = name;
  v.dtype = read_dtype(file, name, t);
  if (!t.contains("shape") || !t["shape"].is_array()) fail(file, name, "missing or non-list shape");
  std::size_t numel = 1;
  for (const json& d : t["shape"]) {
    if (!d.is_number_unsigned()) fail(file, name, "shape entry " + d.dump() + " is not a non-negative integer");
    const auto s = d.get<std::size_t>();
    if (__builtin_mul_overflow(numel, s, &numel)) fail(file, name, "shape " + t["shape"].dump() + " overflows");
    v.shape.push_back(s);
  }
  std::size_t nbytes = 0;
  if (__builtin_mul_overflow(numel, dtype_size(v.dtype), &nbytes)) fail(file, name, "shape overflows");

  const json& off = t.contains("data_offsets") ? t["data_offsets"] : json();
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail(file, name, "data_offsets must be a list [begin, end] of two non-negative integers");
  e.begin = off[0].get<std::size_t>();
  e.end = off[1].get<std::size_t>();
  if (e.begin > e.end) fail(file, name, "data_offsets " + off.dump() + " has begin > end");
  if (e.end - e.begin != nbytes)
    fail(file, name,
         "data_offsets " + off.dump() + " span " + std::to_string(e.end - e.begin) + " bytes but shape " +
             t["shape"].dump() + " of " + dtype_name(v.dtype) + " needs " + std::to_string(nbytes));
  return e;
}

struct Range {
  std::size_t begin, end;
  const std::string* name;
};

// The tensors' byte ranges fill the data section exactly: none past its end, no trailing bytes, no overlaps.
void check_ranges(const std::string& file, std::vector<Range>& ranges, std::size_t max_end, std::size_t data_start,
                  std::size_t size) {
  const std::size_t data_size = size - data_start;
  if (max_end > data_size)
    fail(
        file, "",
        "truncated: header needs " + std::to_string(data_start + max_end) + " bytes, file has " + std::to_string(size));
  if (max_end < data_size)
    fail(file, "", "trailing garbage: " + std::to_string(data_size - max_end) + " bytes after the last tensor");
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  const Range* reach = nullptr;  // the range reaching furthest so far
  for (const Range& b : ranges) {
    if (b.begin == b.end) continue;  // empty tensors occupy no bytes
    if (reach != nullptr && b.begin < reach->end)
      fail(file, *b.name,
           "data overlaps tensor " + *reach->name + " ([" + std::to_string(b.begin) + ", " + std::to_string(b.end) +
               ") vs [" + std::to_string(reach->begin) + ", " + std::to_string(reach->end) + "))");
    if (reach == nullptr || b.end > reach->end) reach = &b;
  }
}

}  // namespace

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const Mapping m = map_file(file);
  f->map_ = m.data;  // unmapped by the destructor from here on, whatever fails below
  f->size_ = m.size;
  const auto* base = static_cast<const std::byte*>(m.data);
  const auto [h, data_start] = read_header(file, base, m.size);

  std::vector<Range> ranges;
  std::size_t max_end = 0;
  for (const auto& [name, t] : h.items()) {
    if (name == "__metadata__") {
      f->metadata_ = read_metadata(file, t);
      continue;
    }
    Entry e = read_entry(file, name, t);
    max_end = std::max(max_end, e.end);
    ranges.push_back({e.begin, e.end, nullptr});
    auto [it, inserted] = f->tensors_.emplace(name, std::move(e.view));
    ranges.back().name = &it->first;
  }
  check_ranges(file, ranges, max_end, data_start, m.size);
  for (auto& [name, v] : f->tensors_) {
    const auto& off = h[name]["data_offsets"];
    const auto begin = off[0].get<std::size_t>();
    v.bytes = std::span<const std::byte>(base + data_start + begin, off[1].get<std::size_t>() - begin);
  }
  return f;
}

}  // namespace kvconf::engine
