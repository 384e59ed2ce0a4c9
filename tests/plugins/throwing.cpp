// Machine plugins that throw: one from its constructor, one from describe().
// The host must report both and keep running.
#include <stdexcept>

#include "qgpu/sdk/sdk.h"

namespace qgpu::test {

class ThrowingMachine : public sdk::Machine {
 public:
  explicit ThrowingMachine(const sdk::PluginContext& context) {
#ifdef QGPU_TEST_THROW_IN_CREATE
    throw std::runtime_error("constructor exploded");
#endif
  }
  sdk::Expected<sdk::Description> describe() const override { throw std::logic_error("describe exploded"); }
  sdk::Expected<std::unique_ptr<sdk::MachineProgram>> lower(const sdk::KernelIR&, const sdk::LaunchShape&) override {
    throw std::logic_error("lower exploded");
  }
  sdk::Expected<sdk::LaunchResult> interpret(const sdk::MachineProgram&, const std::vector<sdk::LaunchArg>&,
                              const sdk::InterpretOptions&) override {
    throw 42;  // not even a std::exception
  }
};

}  // namespace qgpu::test

#ifdef QGPU_TEST_THROW_IN_CREATE
QGPU_DEFINE_PLUGIN(qgpu::test::ThrowingMachine, "test_throw_create", "0.0.1", "throws from its constructor",
                   qgpu::sdk::kNoOptions)
#else
QGPU_DEFINE_PLUGIN(qgpu::test::ThrowingMachine, "test_throw_describe", "0.0.1", "throws from describe()",
                   qgpu::sdk::kNoOptions)
#endif
