// Safetensors reading and writing, our own implementation.
//
// Format: 8-byte little-endian header length N, N bytes of JSON (a map from
// tensor name to {dtype, shape, data_offsets}, plus an optional string map
// "__metadata__"), then the data area. Offsets are relative to the data area.
// The reader maps the file and checks every byte it will ever touch before
// handing out a view; a hostile file yields a one-line error, never an
// out-of-bounds read. The writer lays tensors out exactly as the reference
// (Rust) implementation does, so identical inputs give identical bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/status.h"
#include "qgpu/sdk/tensor_view.h"

namespace qgpu::qwen35 {

// Every dtype of the safetensors format with a whole-byte element size.
// The numeric order is the reference implementation's, which its writer uses
// (descending) to lay tensors out so that wide elements come first.
enum class StDType : std::uint8_t {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

std::string_view st_dtype_name(StDType dtype);  // "BF16", "F32", ... as in the file
std::size_t st_dtype_size(StDType dtype);
bool st_dtype_is_float(StDType dtype);  // BF16, F16, F32: the ones we compute with
sdk::Expected<StDType> parse_st_dtype(std::string_view name);

// The header's sanity limit (the reference implementation's, 100 MB).
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data area, begin <= end
  std::uint64_t end = 0;

  std::int64_t numel() const;
  std::uint64_t nbytes() const { return end - begin; }
};

// A parsed and fully validated header.
struct SafetensorsHeader {
  std::uint64_t header_bytes = 0;   // N
  std::uint64_t data_offset = 0;    // 8 + N
  std::uint64_t data_bytes = 0;     // size of the data area
  std::vector<TensorInfo> tensors;  // sorted by begin offset (file order)
  std::map<std::string, std::string> metadata;
};

// Validates a whole file given as bytes: header length, JSON, every entry,
// and that the entries tile the data area exactly (no overlaps, no holes, as
// the reference implementation demands). `file_name` only labels errors.
sdk::Expected<SafetensorsHeader> parse_safetensors(std::span<const std::byte> file, std::string_view file_name);

// A view of one tensor inside a mapping. `data` may be unaligned (headers
// written by other tools need not be padded); read it with memcpy or to_f32.
struct TensorRef {
  const TensorInfo* info = nullptr;
  const std::byte* data = nullptr;

  const std::string& name() const { return info->name; }
  StDType dtype() const { return info->dtype; }
  const std::vector<std::int64_t>& shape() const { return info->shape; }
  std::int64_t numel() const { return info->numel(); }
  std::span<const std::byte> bytes() const { return {data, static_cast<std::size_t>(info->nbytes())}; }
  // An SDK view (BF16/F16/F32/I32/I64/U8/BOOL only; rank <= 8), read-only in practice.
  sdk::Expected<sdk::TensorView> view() const;
};

// bf16 and f16 widen to f32 exactly; f32 is copied. Other dtypes are refused.
sdk::Status to_f32(const TensorRef& tensor, std::span<float> out);
sdk::Expected<std::vector<float>> to_f32(const TensorRef& tensor);
float bf16_to_f32(std::uint16_t bits);
float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_bf16(float value);  // round to nearest even; NaN stays NaN

// One memory-mapped safetensors file. Views stay valid while the object lives.
class SafetensorsFile {
 public:
  static sdk::Expected<std::shared_ptr<const SafetensorsFile>> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const TensorInfo* find(std::string_view name) const;
  TensorRef ref(const TensorInfo& info) const;

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  const std::byte* map_ = nullptr;
  std::size_t map_size_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, const TensorInfo*, std::less<>> by_name_;
};

// All tensors of a checkpoint: model.safetensors.index.json with its shards,
// or a single model.safetensors. Each shard is mapped once.
class TensorStore {
 public:
  // `dir` holds the checkpoint. Errors name the file and the problem.
  static sdk::Expected<TensorStore> open_dir(const std::filesystem::path& dir);
  static sdk::Expected<TensorStore> open_file(const std::filesystem::path& file);

  std::size_t size() const { return by_name_.size(); }
  bool contains(std::string_view name) const { return by_name_.find(name) != by_name_.end(); }
  // The tensor, or not-found naming it.
  sdk::Expected<TensorRef> get(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }
  // Tensors whose dtype is not BF16/F16/F32 ("name (I64)"), readable as raw bytes only.
  std::vector<std::string> non_float_tensors() const;

 private:
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, TensorRef, std::less<>> by_name_;
};

// --- Writing.

struct TensorToWrite {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<std::int64_t> shape;
  // Fills exactly nbytes(dtype, shape) bytes; called once, in file order.
  std::function<sdk::Status(std::span<std::byte> out)> fill;
};

// Convenience: a tensor whose bytes already exist (they are copied when written).
TensorToWrite tensor_from_bytes(std::string name, StDType dtype, std::vector<std::int64_t> shape,
                                std::span<const std::byte> bytes);

struct WriteOptions {
  std::map<std::string, std::string> metadata;  // written as "__metadata__" when not empty
  // 0: one file. Otherwise shards of at most this many data bytes (a larger
  // tensor gets a shard of its own), named model-00001-of-0000N.safetensors,
  // plus model.safetensors.index.json.
  std::uint64_t max_shard_bytes = 0;
  // Called after each tensor is written with (bytes written so far, total bytes).
  std::function<void(std::uint64_t, std::uint64_t)> progress;
};

// Writes one file. Tensors are ordered like the reference writer (wider dtype
// first, then by name); the header is padded with spaces to a multiple of 8.
sdk::Status write_safetensors(const std::filesystem::path& file, std::vector<TensorToWrite> tensors,
                              const WriteOptions& options = {});

// Writes model.safetensors (max_shard_bytes == 0) or shards plus the index
// into `dir`, which must exist. Shards take tensors in the order given.
// Returns the files written.
sdk::Expected<std::vector<std::filesystem::path>> write_checkpoint_tensors(const std::filesystem::path& dir,
                                                                           std::vector<TensorToWrite> tensors,
                                                                           const WriteOptions& options = {});

inline constexpr std::string_view kSingleFileName = "model.safetensors";
inline constexpr std::string_view kIndexFileName = "model.safetensors.index.json";

}  // namespace qgpu::qwen35
