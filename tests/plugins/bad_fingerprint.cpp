// A plugin whose C++ ABI fingerprint differs from the host's (as if built
// with another standard library): refused with both fingerprints named.
#include "qgpu/sdk/descriptor.h"

extern "C" __attribute__((visibility("default"))) const QgpuPluginDescriptor* qgpu_plugin_descriptor(void) {
  static const QgpuPluginDescriptor descriptor = {
      QGPU_ABI_VERSION,    sizeof(QgpuPluginDescriptor), QGPU_SDK_VERSION_STRING, "libc++;64-bit;sdk-abi-1",
      QGPU_PLUGIN_MACHINE, "test_bad_fingerprint",       "0.0.1",                 "built with another C++ library",
      nullptr,             0,                            nullptr,                 nullptr,
  };
  return &descriptor;
}
