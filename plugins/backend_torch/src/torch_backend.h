// The LibTorch implementation of sdk::TensorBackend (internal to the plugin,
// its tests and bench/base; nothing here crosses the plugin boundary, and this
// header includes no LibTorch header).
#pragma once

#include <cstdint>
#include <span>

#include "qgpu/sdk/tensor_backend.h"

namespace qgpu::torch_backend {

struct BackendOptions {
  sdk::Device device{};
  sdk::DType dtype = sdk::DType::kF32;  // f32 or bf16
  int threads = 0;                      // intra-op threads; 0 keeps LibTorch's choice
};

class TorchBackend final : public sdk::TensorBackend {
 public:
  // Both throw std::runtime_error when the device is not in this LibTorch
  // build or the dtype is not f32/bf16 (the plugin macro reports it).
  explicit TorchBackend(const BackendOptions& options);
  explicit TorchBackend(const sdk::PluginContext& context);

  sdk::Expected<sdk::Description> describe() const override;
  sdk::Device device() const override { return options_.device; }
  sdk::DType dtype() const override { return options_.dtype; }

  sdk::Expected<sdk::Handle<sdk::Tensor>> upload(const sdk::TensorView& host) override;
  sdk::Status download(const sdk::Tensor& tensor, const sdk::TensorView& host) override;
  sdk::Status download_state(const sdk::LayerState& state, const sdk::TensorView& host) override;
  sdk::Expected<sdk::Handle<sdk::LayerState>> create_state() override;
  sdk::Status copy_state(const sdk::LayerState& from, sdk::LayerState& to) override;
  sdk::Status truncate_state(sdk::LayerState& state, std::int64_t tokens) override;

  sdk::Expected<sdk::Handle<sdk::Tensor>> embed(const sdk::Tensor& table, std::span<const std::int64_t> ids) override;
  sdk::Expected<sdk::Handle<sdk::Tensor>> rms_norm(const sdk::Tensor& x, const sdk::Tensor& weight,
                                                   double eps) override;
  sdk::Expected<sdk::Handle<sdk::Tensor>> mlp(const sdk::Tensor& x, const sdk::MlpWeights& weights) override;
  sdk::Expected<sdk::Handle<sdk::Tensor>> gated_delta_net(const sdk::Tensor& x, const sdk::DeltaNetWeights& weights,
                                                          const sdk::DeltaNetShape& shape, sdk::LayerState& state,
                                                          sdk::DeltaRule rule) override;
  sdk::Expected<sdk::Handle<sdk::Tensor>> gated_attention(const sdk::Tensor& x, const sdk::AttentionWeights& weights,
                                                          const sdk::AttentionShape& shape,
                                                          sdk::LayerState& cache) override;
  sdk::Expected<sdk::Handle<sdk::Tensor>> add(const sdk::Tensor& a, const sdk::Tensor& b) override;
  sdk::Expected<sdk::Handle<sdk::Tensor>> linear(const sdk::Tensor& x, const sdk::Tensor& weight) override;
  sdk::Expected<sdk::Handle<sdk::Tensor>> rows(const sdk::Tensor& x, std::int64_t begin, std::int64_t end) override;

 private:
  BackendOptions options_;
};

// The backend's options from the plugin's validated option values; throws on a bad value.
BackendOptions options_from(const sdk::Options& options);

}  // namespace qgpu::torch_backend
