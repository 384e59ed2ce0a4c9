// A frontend plugin with one option of every type, for config validation tests.
#include <array>

#include "qgpu/sdk/sdk.h"

namespace qgpu::test {

constexpr std::array kOptions = {
    sdk::option_string("label", "hello", "a string"),
    sdk::option_int("count", "3", 1, 10, "an integer in 1..10"),
    sdk::option_float("ratio", "0.5", "a number"),
    sdk::option_bool("flag", "false", "a boolean"),
    sdk::option_enum("mode", "fast", "fast|exact", "a choice"),
    sdk::option_path("data", "none", "none", "an existing path or 'none'"),
};

class OptionsFrontend : public sdk::Frontend {
 public:
  explicit OptionsFrontend(const sdk::PluginContext& context) : options_(context.options) {}
  sdk::Expected<sdk::Description> describe() const override {
    sdk::Description d;
    for (const auto& [key, value] : options_.values()) d.properties.emplace_back(key, value);
    return d;
  }
  sdk::Expected<sdk::KernelModule> compile(const sdk::SourceInput&) override {
    return sdk::not_available("compile (test_options)");
  }

 private:
  sdk::Options options_;
};

}  // namespace qgpu::test

QGPU_DEFINE_PLUGIN(qgpu::test::OptionsFrontend, "test_options", "0.0.1", "declares one option of every type",
                   qgpu::test::kOptions)
