// A plugin whose entry function throws: recorded as a load failure.
#include <stdexcept>

#include "qgpu/sdk/descriptor.h"

extern "C" __attribute__((visibility("default"))) const QgpuPluginDescriptor* qgpu_plugin_descriptor(void) {
  throw std::runtime_error("descriptor exploded");
}
