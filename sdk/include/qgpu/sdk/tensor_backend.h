// TensorBackend: where tensors live and the layer math runs.
#pragma once

#include "qgpu/sdk/plugin.h"
#include "qgpu/sdk/tensor_view.h"

namespace qgpu::sdk {

class QGPU_SDK_API TensorBackend : public Plugin {
 public:
  using Interface = TensorBackend;
  static constexpr QgpuPluginKind kKind = QGPU_PLUGIN_TENSOR_BACKEND;

  ~TensorBackend() override;
  // The device and compute dtype chosen from the config.
  virtual Device device() const = 0;
  virtual DType dtype() const = 0;
};

}  // namespace qgpu::sdk
