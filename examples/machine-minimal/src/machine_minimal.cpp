// machine_minimal: the smallest complete machine plugin, as a starting point.
//
// It shows the three things every plugin has: an option table (validated by
// the host against the config), a class deriving one SDK interface whose
// methods return Status/Expected, and QGPU_DEFINE_PLUGIN. It lowers nothing:
// a real machine replaces lower() and interpret().
#include <qgpu/sdk/sdk.h>

#include <array>
#include <string>

namespace minimal {

constexpr std::array kOptions = {
    qgpu::sdk::option_int("words", "16", 1, 4096, "words of memory"),
};

class MinimalMachine final : public qgpu::sdk::Machine {
 public:
  // Options arrive validated: "words" is present and within 1..4096.
  explicit MinimalMachine(const qgpu::sdk::PluginContext& context)
      : words_(context.options.get_int("words").value()) {
    context.logger.debug("machine_minimal created with " + std::to_string(words_) + " words");
  }

  qgpu::sdk::Expected<qgpu::sdk::Description> describe() const override {
    qgpu::sdk::Description d;
    d.properties = {{"words", std::to_string(words_)}};
    d.capabilities = {{"lower", false, "template plugin: implement lower() here"},
                      {"interpret", false, "template plugin: implement interpret() here"}};
    return d;
  }

  qgpu::sdk::Expected<std::unique_ptr<qgpu::sdk::MachineProgram>> lower(const qgpu::sdk::KernelIR& kernel,
                                                                        const qgpu::sdk::LaunchShape&) override {
    return qgpu::sdk::unsupported("machine_minimal is a template and lowers no kernels (asked for '" + kernel.name +
                                  "')");
  }

  qgpu::sdk::Expected<qgpu::sdk::LaunchResult> interpret(const qgpu::sdk::MachineProgram&,
                                                         const std::vector<qgpu::sdk::LaunchArg>&,
                              const qgpu::sdk::InterpretOptions&) override {
    return qgpu::sdk::unsupported("machine_minimal is a template and has no interpreter");
  }

 private:
  std::int64_t words_;
};

}  // namespace minimal

QGPU_DEFINE_PLUGIN(minimal::MinimalMachine, "machine_minimal", "0.1.0",
                   "template machine plugin built against the installed SDK", minimal::kOptions)
