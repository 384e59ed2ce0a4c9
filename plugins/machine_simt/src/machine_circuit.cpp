#include "machine_circuit.h"

#include <chrono>
#include <cstdio>

#include "choice.h"
#include "protocol.h"
#include "records.h"

namespace qgpu::simt {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The choice's logit scale: α = 1 puts the logits in bits (the chosen row scores
// kChoiceKindWeight, a row with one wrong bit one less).
constexpr double kChoiceAlpha = 1;
// In the merged model the record rows compete with the base's text rows (and read the
// residual after the base's layers): α = 16 puts the chosen row at 16 · 17 = 272 in
// units of the fields' normalized value.
constexpr double kMergedChoiceAlpha = 16;
// ... and the fields are amplified in the circuit's last layer (build_successor's
// choice_gain, circuit::kMergedChoiceGain): at ±gain·u they make up almost all of the
// residual the base's layers add to, so after the final norm each reads about
// ±sqrt(hidden / fields) and what the base adds moves the logits gain times less than it
// would at ±u.

// The target of a request: the machine's own, or (merged) the base's shapes with the mute
// direction's channels reserved.
weights::Target target_for(const sdk::CircuitRequest& request) {
  weights::Target target = circuit::machine_target();
  if (request.engine == sdk::Engine::kModel) {
    if (request.shapes.hidden_size > 0) target.shapes = request.shapes;
    target.mute_channel = true;
    target.mute_width = request.mute_width;
  }
  return target;
}

}  // namespace

sdk::Expected<std::shared_ptr<const SimtCircuit>> SimtCircuit::build(const sdk::CircuitRequest& request,
                                                                     circuit::MemoryLayout memory) {
  if (request.engine != sdk::Engine::kCircuit && request.engine != sdk::Engine::kModel)
    return sdk::invalid_argument(std::string("engine '") + sdk::engine_name(request.engine) +
                                 "' has no circuit (the circuit of: circuit, model)");
  const bool merged = request.engine == sdk::Engine::kModel;
  const weights::Target target = target_for(request);
  std::shared_ptr<SimtCircuit> x(new SimtCircuit());
  x->request_ = request;
  auto t0 = std::chrono::steady_clock::now();
  auto m = circuit::build_machine(x->circuit_, merged ? circuit::kMergedChoiceGain : 1, memory);
  if (!m) return m.status().with_context("building the machine's circuit");
  x->machine_ = std::move(*m);
  // The choice reads the NextToken fields after the last layer: they keep their channels.
  QGPU_RETURN_IF_ERROR(circuit::mark_choice_outputs(x->circuit_, x->machine_.sequencer.next));
  x->build_s_ = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  auto cc = weights::compile(x->circuit_, target);
  if (!cc && merged && cc.status().code() == sdk::ErrorCode::kLimitExceeded)
    return cc.status().with_context("the machine does not fit the base's layer shapes (hidden " +
                                    std::to_string(target.shapes.hidden_size) + ", MLP " +
                                    std::to_string(target.shapes.intermediate_size) + ", " +
                                    std::to_string(target.shapes.linear_num_value_heads) +
                                    " value heads; Qwen3.5-2B's shapes and larger fit, with the mute direction's " +
                                    std::to_string(target.mute_width) + " channels)");
  if (!cc) return cc.status().with_context("compiling the machine's circuit");
  x->cc_ = std::move(*cc);
  x->compile_s_ = seconds_since(t0);
  for (const weights::LayerUse& u : x->cc_.schedule.use) x->key_heads_ += u.key_heads;
  auto u = circuit::record_unembedding(x->machine_.sequencer.next, x->cc_.allocation,
                                       merged ? kMergedChoiceAlpha : kChoiceAlpha);
  if (!u) return u.status().with_context("the machine's unembedding");
  x->unembed_ = std::move(*u);
  return std::shared_ptr<const SimtCircuit>(std::move(x));
}

std::int64_t SimtCircuit::records() const {
  return vocabulary_rows();
}

sdk::Expected<std::vector<float>> SimtCircuit::embedding(std::int64_t record) const {
  auto in = circuit::token_inputs(machine_.fd.records, first_id() + record);
  if (!in) return in.status();
  return weights::embed(circuit_, cc_.allocation, *in);
}

std::string SimtCircuit::summary() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "%d layers, %lld neurons, %lld key heads, %lld of %lld channels (built in %.1f s, compiled in %.1f s)",
                cc_.schedule.num_layers, static_cast<long long>(cc_.total_neurons()),
                static_cast<long long>(key_heads_), static_cast<long long>(cc_.allocation.channels_used),
                static_cast<long long>(cc_.target.shapes.hidden_size), build_s_, compile_s_);
  return line;
}

std::vector<std::pair<std::string, double>> SimtCircuit::timings() const {
  return {{"build_s", build_s_}, {"compile_s", compile_s_}};
}

std::vector<std::pair<std::string, std::int64_t>> SimtCircuit::stats() const {
  return {{"circuit_layers", cc_.schedule.num_layers},
          {"circuit_neurons", cc_.total_neurons()},
          {"circuit_key_heads", key_heads_},
          {"circuit_channels", cc_.allocation.channels_used}};
}

sdk::Status circuit_supports(const MachineConfig& config) {
  struct Range {
    const char* option;
    int value, most;
    bool exact;  // the circuit takes this value only
  };
  const Range ranges[] = {
      {"lanes", config.lanes, kProtoLanes, true},
      {"block_instructions", config.block_instructions, circuit::kMachineSlots, true},
      {"registers", config.registers, kProtoRegisters, false},
      {"rom_blocks", config.rom_blocks, kProtoBlocks, false},
      {"max_block_threads", config.max_block_threads, kProtoWarps * kProtoLanes, false},
      {"max_threads", config.max_threads, kProtoCtas * kProtoWarps * kProtoLanes, false},
  };
  for (const Range& r : ranges) {
    if (r.exact ? r.value == r.most : r.value <= r.most) continue;
    return sdk::unsupported(std::string(r.option) + " " + std::to_string(r.value) + " is beyond the circuit, which takes " +
                            (r.exact ? "only " : "at most ") + std::to_string(r.most) + "; --engine interp runs it");
  }
  auto memory = circuit::memory_layout_for(config.global_words, config.shared_words);
  if (!memory) return sdk::unsupported(memory.status().message() + "; --engine interp runs it");
  return sdk::Status::ok();
}

}  // namespace qgpu::simt
