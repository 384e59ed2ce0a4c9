// machine_simt: the 4-lane SIMT GPU — ISA, lowering, reference interpreter
// (this build), token codec (src/protocol.*) and circuit (a later issue).
#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config.h"
#include "interp.h"
#include "lower.h"
#include "launch_codec.h"
#include "machine_circuit.h"
#include "protocol.h"
#include "qgpu/sdk/sdk.h"
#include "qgpu/weights/report.h"

namespace qgpu::simt {
namespace {

constexpr std::array kOptions = {
    sdk::option_int("lanes", "4", 4, 4, "lanes per warp (the circuit is built for 4)"),
    sdk::option_int("registers", "16", 2, 16, "registers per lane, r0 reads as zero"),
    sdk::option_int("rom_blocks", "32", 1, 256, "program ROM size in blocks (circuit and model: at most 128)"),
    sdk::option_int("block_instructions", "4", 4, 16,
                    "straight-line instructions per block before the terminator (circuit and model: 4)"),
    sdk::option_int("global_words", "126", 1, 1 << 20,
                    "32-bit words of global memory (circuit and model: at most 1024; from 513 on the circuit has 47 "
                    "layers instead of 44)"),
    sdk::option_int("shared_words", "32", 0, 1 << 16,
                    "32-bit words of shared memory per thread block (circuit and model: at most 512)"),
    sdk::option_int("max_threads", "128", 1, 1 << 16, "threads per launch (circuit and model: at most 4096)"),
    sdk::option_int("max_block_threads", "32", 1, 1024, "threads per thread block (circuit and model: at most 32)"),
};

class SimtMachine final : public sdk::Machine {
 public:
  explicit SimtMachine(const sdk::PluginContext& context) : options_(context.options) {}

  sdk::Expected<sdk::Description> describe() const override {
    sdk::Description d;
    for (const auto& spec : kOptions) {
      auto value = options_.get_int(spec.name);
      if (!value) return value.error();
      d.properties.emplace_back(spec.name, std::to_string(*value));
    }
    d.properties.emplace_back("opcodes", std::to_string(kOpCount));
    // The circuit has fixed sizes: options beyond them leave the interpreter only, said here so that
    // a launch on the circuit or the model is refused before anything compiles.
    auto config = MachineConfig::from_options(options_);
    if (!config) return config.error();
    const sdk::Status circuit = circuit_supports(*config);
    d.capabilities = {
        {"lower", true, "KernelIR -> machine blocks (docs/ISA.md)"},
        {"interpret", true, "reference interpreter (the semantic oracle)"},
        {"protocol", true, "token codec and expected record stream (docs/PROTOCOL.md; run --records)"},
        {"circuit", circuit.is_ok(),
         circuit.is_ok()
             ? "run --engine circuit: the machine's compiled layers alone generate the launch (reference layer math)"
             : circuit.message()},
        {"model", circuit.is_ok(),
         circuit.is_ok()
             ? "run --engine model: the circuit merged in front of a Qwen3.5 base of hidden >= 2048 generates the launch"
             : circuit.message()},
    };
    return d;
  }

  sdk::Expected<std::unique_ptr<sdk::MachineProgram>> lower(const sdk::KernelIR& kernel,
                                                            const sdk::LaunchShape& shape) override {
    auto config = MachineConfig::from_options(options_);
    if (!config) return config.error();
    auto program = lower_kernel(kernel, shape, *config);
    if (!program) return program.error();
    return std::unique_ptr<sdk::MachineProgram>(std::move(*program));
  }

  sdk::Expected<sdk::LaunchResult> interpret(const sdk::MachineProgram& program,
                                             const std::vector<sdk::LaunchArg>& args,
                                             const sdk::InterpretOptions& options) override {
    const auto* simt = dynamic_cast<const Program*>(&program);
    if (simt == nullptr) return sdk::invalid_argument("machine_simt: the program was not lowered by machine_simt");
    if (!options.records) return interpret_program(*simt, args, options);
    // The same run, observed: the prompt and the record stream the model will have to generate.
    auto launch = record_launch(*simt, args, options);
    if (!launch) return launch.error();
    if (!launch->fault.is_ok()) return launch->fault;
    sdk::LaunchResult result = std::move(launch->result);
    auto line = [](const Record& r) {
      const int n = token_count(r);
      return to_text(r) + "  (" + std::to_string(n) + (n == 1 ? " token)" : " tokens)");
    };
    for (const Record& r : launch->prompt) result.prompt_records.push_back(line(r));
    for (const Record& r : launch->generated) result.generated_records.push_back(line(r));
    result.stats.emplace_back("prompt_tokens", launch->prompt_tokens);
    result.stats.emplace_back("generated_tokens", launch->generated_tokens);
    result.stats.emplace_back("protocol_vocabulary_rows", vocabulary_rows());
    return result;
  }

  sdk::Expected<std::shared_ptr<const sdk::MachineCircuit>> circuit(const sdk::CircuitRequest& request) override {
    auto c = compiled(request);
    if (!c) return c.status();
    return std::shared_ptr<const sdk::MachineCircuit>(*c);
  }

  sdk::Expected<std::unique_ptr<sdk::LaunchCodec>> encode_launch(const sdk::MachineProgram& program,
                                                                 const std::vector<sdk::LaunchArg>& args,
                                                                 const sdk::MachineCircuit& circuit) override {
    const auto* simt = dynamic_cast<const Program*>(&program);
    if (simt == nullptr) return sdk::invalid_argument("machine_simt: the program was not lowered by machine_simt");
    const auto* own = dynamic_cast<const SimtCircuit*>(&circuit);
    if (own == nullptr) return sdk::invalid_argument("machine_simt: the circuit was not built by machine_simt");
    return simt::encode_launch(*simt, args, *own);
  }

  sdk::Expected<std::vector<std::string>> record_token_names() override {
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(vocabulary_rows()));
    for (std::int64_t offset = 0; offset < vocabulary_rows(); ++offset) {
      auto record = token_record(offset);
      // A row the protocol reserves (never fed, never generated) still gets a name of its own.
      names.push_back(record ? token_name(*record) : "reserved " + std::to_string(offset));
    }
    return names;
  }

  sdk::Expected<sdk::CircuitReport> describe_circuit(const sdk::CircuitRequest& request) override {
    auto c = compiled(request);
    if (!c) return c.status();
    return weights::report((*c)->circuit(), (*c)->compiled(), sdk::engine_name(request.engine));
  }

 private:
  // Each circuit is built once per machine instance (~30 s) and kept: the launches of one run, batch
  // or chat, and describe_circuit, asking for the same engine and shapes get the same one.
  sdk::Expected<std::shared_ptr<const SimtCircuit>> compiled(sdk::CircuitRequest request) {
    if (request.engine == sdk::Engine::kCircuit) request = {sdk::Engine::kCircuit, {}, 0};  // its own shapes
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& c : circuits_) {
      const sdk::CircuitRequest& r = c->request();
      if (r.engine == request.engine && r.shapes == request.shapes && r.mute_width == request.mute_width) return c;
    }
    auto config = MachineConfig::from_options(options_);
    if (!config) return config.error();
    auto memory = circuit::memory_layout_for(config->global_words, config->shared_words);
    if (!memory) return memory.status();
    auto c = SimtCircuit::build(request, *memory);
    if (!c) return c.status();
    circuits_.push_back(*c);
    return *c;
  }

  sdk::Options options_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<const SimtCircuit>> circuits_;
};

}  // namespace
}  // namespace qgpu::simt

QGPU_DEFINE_PLUGIN(qgpu::simt::SimtMachine, "machine_simt", "0.1.0",
                   "4-lane SIMT GPU: ISA, lowering, reference interpreter, circuit", qgpu::simt::kOptions)
