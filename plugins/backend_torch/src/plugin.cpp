// backend_torch: tensors and layer math on LibTorch (CPU, CUDA, MPS).
//
// The only translation unit here that includes ATen headers; nothing from
// LibTorch leaves this plugin. This build chooses and checks the device,
// dtype and thread count; the layer math arrives with the backend issue.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/api/include/torch/version.h>

#include <array>
#include <stdexcept>
#include <string>

#include "qgpu/sdk/sdk.h"

namespace qgpu::torch_backend {
namespace {

constexpr std::array kOptions = {
    sdk::option_string("device", "cpu", "cpu, cuda, cuda:N or mps"),
    sdk::option_enum("dtype", "f32", "f32|bf16", "compute dtype of the layers"),
    sdk::option_int("threads", "0", 0, 4096, "intra-op threads on CPU; 0 keeps LibTorch's choice"),
};

bool device_available(sdk::DeviceType type) {
  switch (type) {
    case sdk::DeviceType::kCpu: return true;
    case sdk::DeviceType::kCuda: return at::hasCUDA();
    case sdk::DeviceType::kMps: return at::hasMPS();
  }
  return false;
}

template <typename T>
T value_or_throw(sdk::Expected<T> value) {
  if (!value) throw std::runtime_error(value.error().message());
  return std::move(value).value();
}

class TorchBackend final : public sdk::TensorBackend {
 public:
  explicit TorchBackend(const sdk::PluginContext& context) {
    device_ = value_or_throw(sdk::parse_device(value_or_throw(context.options.get_string("device"))));
    dtype_ = value_or_throw(sdk::parse_dtype(value_or_throw(context.options.get_string("dtype"))));
    if (!device_available(device_.type)) {
      throw std::runtime_error("device '" + sdk::device_name(device_) + "' is not available in this LibTorch " +
                               TORCH_VERSION + " build");
    }
    const auto threads = value_or_throw(context.options.get_int("threads"));
    if (threads > 0) at::set_num_threads(static_cast<int>(threads));
  }

  sdk::Expected<sdk::Description> describe() const override {
    sdk::Description d;
    d.properties = {
        {"libtorch", TORCH_VERSION},
        {"device", sdk::device_name(device_)},
        {"dtype", std::string(sdk::dtype_name(dtype_))},
        {"threads", std::to_string(at::get_num_threads())},
        {"cuda", at::hasCUDA() ? "available" : "not in this build"},
        {"mps", at::hasMPS() ? "available" : "not in this build"},
    };
    d.capabilities = {
        {"device.cpu", true, ""},
        {"device.cuda", at::hasCUDA(), at::hasCUDA() ? "" : "LibTorch built without CUDA"},
        {"dtype.f32", true, ""},
        {"dtype.bf16", true, ""},
        {"layers", false, "not available in this build (RMSNorm, Gated DeltaNet, attention, SwiGLU arrive with the backend issue)"},
    };
    return d;
  }

  sdk::Device device() const override { return device_; }
  sdk::DType dtype() const override { return dtype_; }

 private:
  sdk::Device device_;
  sdk::DType dtype_ = sdk::DType::kF32;
};

}  // namespace
}  // namespace qgpu::torch_backend

QGPU_DEFINE_PLUGIN(qgpu::torch_backend::TorchBackend, "backend_torch", "0.1.0",
                   "LibTorch tensor backend (CPU; CUDA/MPS where LibTorch has them), f32 and bf16",
                   qgpu::torch_backend::kOptions)
