// TensorView: how tensors cross a plugin boundary.
//
// A non-owning, versioned description of a strided tensor in the spirit of
// DLPack. Plugins never see another plugin's tensor type (no torch::Tensor in
// the SDK); they exchange views whose lifetime the producer documents.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "qgpu/sdk/status.h"

namespace qgpu::sdk {

// Bumped whenever the layout of TensorView changes.
inline constexpr std::uint32_t kTensorViewVersion = 1;

enum class DType : std::uint8_t { kF32, kBF16, kF16, kI32, kI64, kU8, kBool };

enum class DeviceType : std::uint8_t { kCpu, kCuda, kMps };

struct Device {
  DeviceType type = DeviceType::kCpu;
  std::int32_t index = 0;
};

// Size in bytes of one element.
std::size_t dtype_size(DType dtype);
// Canonical names: "f32", "bf16", "f16", "i32", "i64", "u8", "bool".
std::string_view dtype_name(DType dtype);
Expected<DType> parse_dtype(std::string_view name);  // also accepts "fp32", "float32", "bfloat16", ...
std::string_view device_type_name(DeviceType type);  // "cpu", "cuda", "mps"
std::string device_name(Device device);              // "cpu", "cuda:1", ...
Expected<Device> parse_device(std::string_view name);

inline constexpr int kMaxTensorRank = 8;

struct TensorView {
  std::uint32_t version = kTensorViewVersion;
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device{};
  std::int32_t rank = 0;
  std::int64_t shape[kMaxTensorRank] = {};
  // Strides in elements. All zero means contiguous row-major.
  std::int64_t strides[kMaxTensorRank] = {};

  std::int64_t numel() const;
  bool is_contiguous() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
};

// A contiguous view over caller-owned memory; fails on a rank above kMaxTensorRank
// or a negative dimension.
Expected<TensorView> make_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               Device device = {});

// Checks the version and shape of a view received from another plugin.
Status validate_view(const TensorView& view);

}  // namespace qgpu::sdk
