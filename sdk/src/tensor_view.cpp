#include "qgpu/sdk/tensor_view.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

namespace qgpu::sdk {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kBool: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
  }
  return "?";
}

Expected<DType> parse_dtype(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "f32" || n == "fp32" || n == "float32" || n == "float") return DType::kF32;
  if (n == "bf16" || n == "bfloat16") return DType::kBF16;
  if (n == "f16" || n == "fp16" || n == "float16" || n == "half") return DType::kF16;
  if (n == "i32" || n == "int32") return DType::kI32;
  if (n == "i64" || n == "int64") return DType::kI64;
  if (n == "u8" || n == "uint8") return DType::kU8;
  if (n == "bool") return DType::kBool;
  return invalid_argument("unknown dtype '" + std::string(name) + "' (expected f32, bf16, f16, i32, i64, u8 or bool)");
}

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kCpu: return "cpu";
    case DeviceType::kCuda: return "cuda";
    case DeviceType::kMps: return "mps";
  }
  return "?";
}

std::string device_name(Device device) {
  std::string name(device_type_name(device.type));
  if (device.type == DeviceType::kCuda) name += ":" + std::to_string(device.index);
  return name;
}

Expected<Device> parse_device(std::string_view name) {
  auto colon = name.find(':');
  std::string_view type = name.substr(0, colon);
  Device device;
  if (type == "cpu") {
    device.type = DeviceType::kCpu;
  } else if (type == "cuda") {
    device.type = DeviceType::kCuda;
  } else if (type == "mps") {
    device.type = DeviceType::kMps;
  } else {
    return invalid_argument("unknown device '" + std::string(name) + "' (expected cpu, cuda, cuda:N or mps)");
  }
  if (colon != std::string_view::npos) {
    std::string_view index = name.substr(colon + 1);
    auto [ptr, ec] = std::from_chars(index.data(), index.data() + index.size(), device.index);
    if (ec != std::errc() || ptr != index.data() + index.size() || device.index < 0 ||
        device.type != DeviceType::kCuda) {
      return invalid_argument("bad device index in '" + std::string(name) + "'");
    }
  }
  return device;
}

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  if (std::all_of(strides, strides + rank, [](std::int64_t s) { return s == 0; })) return true;
  std::int64_t expected = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

Expected<TensorView> make_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape, Device device) {
  if (shape.size() > static_cast<std::size_t>(kMaxTensorRank)) {
    return invalid_argument("tensor rank " + std::to_string(shape.size()) + " exceeds the maximum of " +
                            std::to_string(kMaxTensorRank));
  }
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.device = device;
  view.rank = static_cast<std::int32_t>(shape.size());
  int i = 0;
  for (std::int64_t d : shape) {
    if (d < 0) return invalid_argument("negative tensor dimension " + std::to_string(d));
    view.shape[i++] = d;
  }
  return view;
}

Status validate_view(const TensorView& view) {
  if (view.version != kTensorViewVersion) {
    return invalid_argument("tensor view version " + std::to_string(view.version) + ", expected " +
                            std::to_string(kTensorViewVersion));
  }
  if (view.rank < 0 || view.rank > kMaxTensorRank) {
    return invalid_argument("tensor view rank " + std::to_string(view.rank) + " outside 0.." +
                            std::to_string(kMaxTensorRank));
  }
  for (int i = 0; i < view.rank; ++i) {
    if (view.shape[i] < 0) return invalid_argument("tensor view has negative dimension " + std::to_string(i));
  }
  if (view.data == nullptr && view.numel() != 0) return invalid_argument("tensor view has no data");
  return Status::ok();
}

}  // namespace qgpu::sdk
