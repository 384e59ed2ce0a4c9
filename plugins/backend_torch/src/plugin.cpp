// backend_torch: tensors and layer math on LibTorch (CPU, CUDA, MPS).
//
// The plugin's descriptor and options; the backend itself is TorchBackend
// (torch_backend.cpp) and the Qwen3.5 math is qwen35_ops.cpp. Nothing from
// LibTorch leaves this plugin.
#include <array>

#include "qgpu/sdk/sdk.h"
#include "torch_backend.h"

namespace qgpu::torch_backend {
namespace {

constexpr std::array kOptions = {
    sdk::option_string("device", "cpu", "cpu, cuda, cuda:N or mps"),
    sdk::option_enum("dtype", "f32", "f32|bf16", "compute dtype of the layers"),
    sdk::option_int("threads", "0", 0, 4096, "intra-op threads on CPU; 0 keeps LibTorch's choice"),
};

}  // namespace
}  // namespace qgpu::torch_backend

QGPU_DEFINE_PLUGIN(qgpu::torch_backend::TorchBackend, "backend_torch", "0.2.0",
                   "LibTorch tensor backend: Qwen3.5 layers (CPU; CUDA/MPS where LibTorch has them), f32 and bf16",
                   qgpu::torch_backend::kOptions)
