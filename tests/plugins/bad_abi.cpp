// A plugin built for a different plugin ABI: the host must refuse it and name
// both versions. The descriptor is written by hand, as an old or future SDK
// would have laid it out.
#include "qgpu/sdk/descriptor.h"

extern "C" __attribute__((visibility("default"))) const QgpuPluginDescriptor* qgpu_plugin_descriptor(void) {
  static const QgpuPluginDescriptor descriptor = {
      QGPU_ABI_VERSION + 41, sizeof(QgpuPluginDescriptor), "9.9.9", QGPU_BUILD_FINGERPRINT,
      QGPU_PLUGIN_MACHINE,   "test_bad_abi",               "0.0.1", "built against another ABI",
      nullptr,               0,                            nullptr, nullptr,
  };
  return &descriptor;
}
