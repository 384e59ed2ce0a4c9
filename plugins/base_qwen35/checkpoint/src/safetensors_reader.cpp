// Safetensors reader: header validation, memory mapping, checkpoint directories.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "qgpu/qwen35/safetensors.h"
#include "util.h"

namespace qgpu::qwen35 {

using sdk::ErrorCode;
using sdk::Expected;
using sdk::Status;

// Tensor data are little-endian in the file and handed out as views without swapping.
static_assert(std::endian::native == std::endian::little, "big-endian hosts would need byte swaps");

namespace {

struct DTypeEntry {
  StDType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {StDType::kBool, "BOOL", 1},      {StDType::kU8, "U8", 1},          {StDType::kI8, "I8", 1},
    {StDType::kF8E5M2, "F8_E5M2", 1}, {StDType::kF8E4M3, "F8_E4M3", 1}, {StDType::kI16, "I16", 2},
    {StDType::kU16, "U16", 2},        {StDType::kF16, "F16", 2},        {StDType::kBF16, "BF16", 2},
    {StDType::kI32, "I32", 4},        {StDType::kU32, "U32", 4},        {StDType::kF32, "F32", 4},
    {StDType::kF64, "F64", 8},        {StDType::kI64, "I64", 8},        {StDType::kU64, "U64", 8},
};

Status header_error(std::string_view file, std::string message, ErrorCode code = ErrorCode::kParseError) {
  return sdk::error_at(std::string(file), code, std::move(message));
}

std::string json_kind(const nlohmann::json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return printable(value.dump());
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "a value";
}

// Reads a non-negative JSON integer; nlohmann stores integers above 2^64-1 as floats.
bool get_u64(const nlohmann::json& value, std::uint64_t& out) {
  if (!value.is_number_unsigned()) return false;
  out = value.get<std::uint64_t>();
  return true;
}

Status parse_entry(std::string_view file, const std::string& name, const nlohmann::json& entry, TensorInfo& info) {
  const std::string label = "tensor '" + printable(name) + "'";
  if (!entry.is_object()) return header_error(file, label + ": expected an object, got " + json_kind(entry));
  info.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) return header_error(file, label + ": missing 'dtype'");
  if (!dtype_it->is_string())
    return header_error(file, label + ": dtype must be a string, got " + json_kind(*dtype_it));
  auto dtype = parse_st_dtype(dtype_it->get_ref<const std::string&>());
  if (!dtype) return header_error(file, label + ": " + dtype.error().message());
  info.dtype = *dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) return header_error(file, label + ": missing 'shape'");
  if (!shape_it->is_array()) return header_error(file, label + ": shape must be an array, got " + json_kind(*shape_it));
  for (std::size_t i = 0; i < shape_it->size(); ++i) {
    std::uint64_t dim = 0;
    const auto& d = (*shape_it)[i];
    if (!get_u64(d, dim)) {
      return header_error(
          file, label + ": shape[" + std::to_string(i) + "] must be a non-negative integer, got " + json_kind(d));
    }
    if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return header_error(file,
                          label + ": shape[" + std::to_string(i) + "] = " + std::to_string(dim) + " exceeds 2^63-1");
    }
    info.shape.push_back(static_cast<std::int64_t>(dim));
  }
  // Element and byte counts, overflow-checked; a zero dimension makes the tensor empty.
  std::uint64_t expected_bytes = 0;
  if (std::find(info.shape.begin(), info.shape.end(), 0) == info.shape.end()) {
    std::uint64_t numel = 1;
    bool ok = true;
    for (auto dim : info.shape) ok = ok && checked_mul(numel, static_cast<std::uint64_t>(dim), numel);
    ok = ok && checked_mul(numel, st_dtype_size(info.dtype), expected_bytes);
    if (!ok) {
      return header_error(file, label + ": shape " + shape_string(info.shape) + " of " +
                                    std::string(st_dtype_name(info.dtype)) + " overflows a 64-bit byte count");
    }
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) return header_error(file, label + ": missing 'data_offsets'");
  if (!offsets_it->is_array() || offsets_it->size() != 2) {
    return header_error(file, label + ": data_offsets must be an array of two integers");
  }
  if (!get_u64((*offsets_it)[0], info.begin) || !get_u64((*offsets_it)[1], info.end)) {
    return header_error(file, label + ": data_offsets must be non-negative integers");
  }
  if (info.begin > info.end) {
    return header_error(file, label + ": data_offsets [" + std::to_string(info.begin) + ", " +
                                  std::to_string(info.end) + "] end before they begin");
  }
  if (info.end - info.begin != expected_bytes) {
    return header_error(file, label + ": data_offsets [" + std::to_string(info.begin) + ", " +
                                  std::to_string(info.end) + "] hold " + std::to_string(info.end - info.begin) +
                                  " bytes but shape " + shape_string(info.shape) + " of " +
                                  std::string(st_dtype_name(info.dtype)) + " needs " + std::to_string(expected_bytes));
  }
  return Status::ok();
}

}  // namespace

std::string_view st_dtype_name(StDType dtype) {
  for (const auto& e : kDTypes)
    if (e.dtype == dtype) return e.name;
  return "?";
}

std::size_t st_dtype_size(StDType dtype) {
  for (const auto& e : kDTypes)
    if (e.dtype == dtype) return e.size;
  return 0;
}

bool st_dtype_is_float(StDType dtype) {
  return dtype == StDType::kBF16 || dtype == StDType::kF16 || dtype == StDType::kF32;
}

Expected<StDType> parse_st_dtype(std::string_view name) {
  for (const auto& e : kDTypes)
    if (e.name == name) return e.dtype;
  return sdk::unsupported("unknown or unsupported dtype '" + printable(name) + "'");
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto d : shape)
    if (d == 0) return 0;
  for (auto d : shape) n *= d;  // cannot overflow: validated against the data area
  return n;
}

namespace {

Expected<SafetensorsHeader> parse_impl(std::span<const std::byte> file, std::string_view file_name) {
  SafetensorsHeader header;
  if (file.size() < 8) {
    return header_error(file_name,
                        "file is " + std::to_string(file.size()) + " bytes, too short for the 8-byte header length");
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(file[i]);
  if (n > kMaxHeaderBytes) {
    return header_error(file_name,
                        "header length " + std::to_string(n) + " exceeds the limit of " +
                            std::to_string(kMaxHeaderBytes) + " bytes by " + std::to_string(n - kMaxHeaderBytes),
                        ErrorCode::kLimitExceeded);
  }
  if (n > file.size() - 8) {
    return header_error(file_name, "header length " + std::to_string(n) + " runs past the end of the file (" +
                                       std::to_string(file.size()) + " bytes, short by " +
                                       std::to_string(n - (file.size() - 8)) + ")");
  }
  header.header_bytes = n;
  header.data_offset = 8 + n;
  header.data_bytes = file.size() - header.data_offset;
  if (n < 2 || file[8] != std::byte{'{'}) return header_error(file_name, "header does not start with '{'");

  // Duplicate keys are ambiguous (JSON parsers differ on which wins): refuse them.
  std::vector<std::set<std::string>> keys_at_depth;
  std::string duplicate;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      if (static_cast<int>(keys_at_depth.size()) <= depth) keys_at_depth.resize(depth + 1);
      keys_at_depth[depth].clear();
    } else if (event == E::key && duplicate.empty()) {
      auto& keys = keys_at_depth[depth - 1];
      if (!keys.insert(parsed.get<std::string>()).second) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text, text + n, callback);
  } catch (const nlohmann::json::parse_error& e) {
    return header_error(file_name, "header is not valid JSON (error at header byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::exception&) {  // out_of_range: a number beyond double
    return header_error(file_name, "header is not valid JSON (a number is out of range)");
  }
  if (!duplicate.empty()) return header_error(file_name, "duplicate key '" + printable(duplicate) + "' in header");
  if (!root.is_object()) return header_error(file_name, "header is not a JSON object");

  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return header_error(file_name, "__metadata__ must be an object of strings");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          return header_error(file_name,
                              "__metadata__ entry '" + printable(mk) + "' must be a string, got " + json_kind(mv));
        }
        header.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    TensorInfo info;
    QGPU_RETURN_IF_ERROR(parse_entry(file_name, key, value, info));
    if (info.end > header.data_bytes) {
      return header_error(file_name, "tensor '" + printable(key) + "': data_offsets [" + std::to_string(info.begin) +
                                         ", " + std::to_string(info.end) + "] end past the data area of " +
                                         std::to_string(header.data_bytes) + " bytes");
    }
    header.tensors.push_back(std::move(info));
  }

  // The entries must tile the data area: no overlap (aliasing), no hole (hidden bytes).
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const auto& t : header.tensors) {
    if (t.begin < covered) {
      return header_error(file_name, "tensor '" + printable(t.name) + "' [" + std::to_string(t.begin) + ", " +
                                         std::to_string(t.end) + ") overlaps tensor '" + printable(previous->name) +
                                         "' [" + std::to_string(previous->begin) + ", " +
                                         std::to_string(previous->end) + ")");
    }
    if (t.begin > covered) {
      return header_error(file_name, "data bytes [" + std::to_string(covered) + ", " + std::to_string(t.begin) +
                                         ") before tensor '" + printable(t.name) + "' belong to no tensor");
    }
    covered = t.end;
    previous = &t;
  }
  if (covered != header.data_bytes) {
    return header_error(file_name, "data bytes [" + std::to_string(covered) + ", " + std::to_string(header.data_bytes) +
                                       ") at the end belong to no tensor");
  }
  return header;
}

}  // namespace

Expected<SafetensorsHeader> parse_safetensors(std::span<const std::byte> file, std::string_view file_name) {
  try {
    return parse_impl(file, file_name);
  } catch (const std::exception& e) {  // a bug or out of memory; never let it cross the plugin boundary
    return header_error(file_name, std::string("unexpected error while parsing: ") + e.what(), ErrorCode::kInternal);
  }
}

// --- Conversions.

float bf16_to_f32(std::uint16_t bits) {
  std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t u;
  if (exponent == 0x1f) {
    u = sign | 0x7f800000u | (mantissa << 13);  // inf / NaN (payload kept)
  } else if (exponent != 0) {
    u = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    u = sign;
  } else {
    // Subnormal half: normalise; every half value is exact in f32.
    int e = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    u = sign | (static_cast<std::uint32_t>(e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t f32_to_bf16(float value) {
  std::uint32_t u;
  std::memcpy(&u, &value, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

Status to_f32(const TensorRef& tensor, std::span<float> out) {
  const auto n = static_cast<std::size_t>(tensor.numel());
  if (out.size() != n) {
    return sdk::invalid_argument("tensor '" + printable(tensor.name()) + "' has " + std::to_string(n) +
                                 " elements, output holds " + std::to_string(out.size()));
  }
  const std::byte* p = tensor.data;
  if (n == 0 && st_dtype_is_float(tensor.dtype())) return Status::ok();  // memcpy must not see a null pointer
  switch (tensor.dtype()) {
    case StDType::kF32: std::memcpy(out.data(), p, n * 4); return Status::ok();
    case StDType::kBF16:
    case StDType::kF16: {
      const bool bf = tensor.dtype() == StDType::kBF16;
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, p + 2 * i, 2);
        out[i] = bf ? bf16_to_f32(bits) : f16_to_f32(bits);
      }
      return Status::ok();
    }
    default:
      return sdk::unsupported("tensor '" + printable(tensor.name()) + "' has dtype " +
                              std::string(st_dtype_name(tensor.dtype())) + ", not a float type (BF16, F16, F32)");
  }
}

Expected<std::vector<float>> to_f32(const TensorRef& tensor) {
  if (!st_dtype_is_float(tensor.dtype())) {
    return sdk::unsupported("tensor '" + printable(tensor.name()) + "' has dtype " +
                            std::string(st_dtype_name(tensor.dtype())) + ", not a float type (BF16, F16, F32)");
  }
  std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
  QGPU_RETURN_IF_ERROR(to_f32(tensor, out));
  return out;
}

Expected<sdk::TensorView> TensorRef::view() const {
  sdk::TensorView v;
  switch (dtype()) {
    case StDType::kF32: v.dtype = sdk::DType::kF32; break;
    case StDType::kBF16: v.dtype = sdk::DType::kBF16; break;
    case StDType::kF16: v.dtype = sdk::DType::kF16; break;
    case StDType::kI32: v.dtype = sdk::DType::kI32; break;
    case StDType::kI64: v.dtype = sdk::DType::kI64; break;
    case StDType::kU8: v.dtype = sdk::DType::kU8; break;
    case StDType::kBool: v.dtype = sdk::DType::kBool; break;
    default:
      return sdk::unsupported("tensor '" + printable(name()) + "': dtype " + std::string(st_dtype_name(dtype())) +
                              " has no SDK tensor view");
  }
  if (shape().size() > static_cast<std::size_t>(sdk::kMaxTensorRank)) {
    return sdk::limit_exceeded("tensor '" + printable(name()) + "' has rank " + std::to_string(shape().size()) +
                               ", over the view limit of " + std::to_string(sdk::kMaxTensorRank));
  }
  v.data = const_cast<std::byte*>(data);  // views are non-owning and untyped; this mapping is read-only
  v.rank = static_cast<std::int32_t>(shape().size());
  for (std::size_t i = 0; i < shape().size(); ++i) v.shape[i] = shape()[i];
  return v;
}

// --- SafetensorsFile.

Expected<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return sdk::error_at(name, err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
                         std::string("cannot open: ") + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return sdk::error_at(name, ErrorCode::kIoError, "not a regular file");
  }
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_size_ = static_cast<std::size_t>(st.st_size);
  if (file->map_size_ > 0) {
    void* map = ::mmap(nullptr, file->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return sdk::error_at(name, ErrorCode::kIoError, std::string("cannot map: ") + std::strerror(err));
    }
    file->map_ = static_cast<const std::byte*>(map);
  }
  ::close(fd);
  auto header = parse_safetensors({file->map_, file->map_size_}, name);
  if (!header) return header.error();
  file->header_ = std::move(*header);
  for (const auto& t : file->header_.tensors) file->by_name_.emplace(t.name, &t);
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_size_);
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

TensorRef SafetensorsFile::ref(const TensorInfo& info) const {
  return TensorRef{&info, map_ + header_.data_offset + info.begin};
}

// --- TensorStore.

Expected<TensorStore> TensorStore::open_file(const std::filesystem::path& file) {
  auto f = SafetensorsFile::open(file);
  if (!f) return f.error();
  TensorStore store;
  store.files_.push_back(*f);
  for (const auto& t : (*f)->header().tensors) store.by_name_.emplace(t.name, (*f)->ref(t));
  return store;
}

Expected<TensorStore> TensorStore::open_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto index_path = dir / kIndexFileName;
  if (!std::filesystem::exists(index_path, ec)) {
    const auto single = dir / kSingleFileName;
    if (!std::filesystem::exists(single, ec)) {
      return sdk::not_found(dir.string() + ": no " + std::string(kIndexFileName) + " and no " +
                            std::string(kSingleFileName));
    }
    return open_file(single);
  }
  const std::string index_name = index_path.string();
  std::ifstream in(index_path, std::ios::binary);
  if (!in) return sdk::error_at(index_name, ErrorCode::kIoError, "cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return sdk::error_at(line_col(index_name, text, e.byte), ErrorCode::kParseError, "invalid JSON");
  } catch (const nlohmann::json::exception&) {
    return sdk::error_at(index_name, ErrorCode::kParseError, "invalid JSON: a number is out of range");
  }
  if (!index.is_object()) return sdk::error_at(index_name, ErrorCode::kParseError, "expected a JSON object");
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object()) {
    return sdk::error_at(index_name, ErrorCode::kParseError, "missing object 'weight_map'");
  }
  TensorStore store;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
  for (const auto& [tensor, shard_json] : wm->items()) {
    if (!shard_json.is_string()) {
      return sdk::error_at(index_name, ErrorCode::kParseError,
                           "weight_map['" + printable(tensor) + "'] must be a file name, got " + json_kind(shard_json));
    }
    const auto& shard = shard_json.get_ref<const std::string&>();
    // Shards live beside the index: a path could reach any file on the machine.
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
        shard == "." || shard == "..") {
      return sdk::error_at(index_name, ErrorCode::kParseError,
                           "weight_map['" + printable(tensor) + "'] = '" + printable(shard) +
                               "' is not a plain file name in the checkpoint directory");
    }
    auto it = shards.find(shard);
    if (it == shards.end()) {
      const auto shard_path = dir / shard;
      if (!std::filesystem::exists(shard_path, ec)) {
        return sdk::error_at(
            index_name, ErrorCode::kNotFound,
            "shard '" + printable(shard) + "' (for tensor '" + printable(tensor) + "') does not exist");
      }
      auto f = SafetensorsFile::open(shard_path);
      if (!f) return f.error();
      it = shards.emplace(shard, *f).first;
      store.files_.push_back(*f);
    }
    const TensorInfo* info = it->second->find(tensor);
    if (info == nullptr) {
      return sdk::error_at(index_name, ErrorCode::kNotFound,
                           "tensor '" + printable(tensor) + "' is mapped to '" + printable(shard) +
                               "' but that shard does not contain it");
    }
    store.by_name_.emplace(tensor, it->second->ref(*info));
  }
  return store;
}

Expected<TensorRef> TensorStore::get(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return sdk::not_found("no tensor '" + printable(name) + "' in the checkpoint");
  return it->second;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [name, ref] : by_name_) out.push_back(name);
  return out;
}

std::vector<std::string> TensorStore::non_float_tensors() const {
  std::vector<std::string> out;
  for (const auto& [name, ref] : by_name_)
    if (!st_dtype_is_float(ref.dtype())) out.push_back(name + " (" + std::string(st_dtype_name(ref.dtype())) + ")");
  return out;
}

}  // namespace qgpu::qwen35
