#include "qgpu/weights/report.h"

#include <map>

#include "compile_internal.h"

namespace qgpu::weights {
namespace {

std::string first_part(const std::string& name) {
  return name.substr(0, name.find('.'));
}

}  // namespace

std::string unit_of(const Circuit& circuit, const Op& op) {
  const int field = op.is_mlp ? (op.writes.empty() ? -1 : op.writes.front().field) : op.gdn.out_field;
  if (field >= 0 && static_cast<std::size_t>(field) < circuit.fields().size())
    return first_part(circuit.fields()[static_cast<std::size_t>(field)].owner);
  return first_part(op.name);
}

sdk::CircuitReport report(const Circuit& circuit, const CompiledCircuit& compiled, const std::string& engine) {
  const Schedule& schedule = compiled.schedule;
  sdk::CircuitReport r;
  r.name = circuit.name();
  r.engine = engine;
  r.shapes = compiled.target.shapes;
  r.mute_width = compiled.target.mute_channel ? compiled.target.mute_width : 0;
  r.fields = static_cast<std::int64_t>(circuit.fields().size());
  r.operations = static_cast<std::int64_t>(circuit.ops().size());
  r.rams = static_cast<std::int64_t>(circuit.rams().size());
  r.channels_used = compiled.allocation.channels_used;
  r.live_peak = compiled.allocation.live_peak;

  // Neurons as emitted (identical ones merged, credited to the first op that needs them; the
  // clears named "clear.<field>"), key heads as the scheduler reserves them per op.
  std::map<std::string, std::string> unit_by_op;
  for (const Op& op : circuit.ops()) unit_by_op.emplace(op.name, unit_of(circuit, op));
  std::vector<std::map<std::string, sdk::CircuitUnitUse>> units(static_cast<std::size_t>(schedule.num_layers));
  auto use = [&](int layer, const std::string& unit) -> sdk::CircuitUnitUse& {
    sdk::CircuitUnitUse& u = units[static_cast<std::size_t>(layer)][unit];
    u.unit = unit;
    return u;
  };
  for (std::size_t i = 0; i < circuit.ops().size() && i < schedule.op_layer.size(); ++i) {
    const Op& op = circuit.ops()[i];
    const int layer = schedule.op_layer[i];
    if (!op.is_mlp && layer >= 0 && layer < schedule.num_layers)
      use(layer, unit_of(circuit, op)).key_heads += detail::key_heads_of(circuit, op, compiled.target.shapes);
  }
  const std::vector<int> live =
      detail::live_bits(circuit, live_ranges(circuit, compiled.target, schedule), 2 * schedule.num_layers - 1);
  for (int layer = 0; layer < schedule.num_layers; ++layer) {
    sdk::CircuitLayer l;
    if (static_cast<std::size_t>(layer) < compiled.layers.size()) {
      for (const std::string& op : compiled.layers[static_cast<std::size_t>(layer)].mlp.neuron_op) {
        ++l.mlp_neurons;
        if (op.rfind("clear.", 0) == 0) {
          ++l.clear_neurons;
          continue;
        }
        auto it = unit_by_op.find(op);
        ++use(layer, it != unit_by_op.end() ? it->second : first_part(op)).mlp_neurons;
      }
    }
    l.live_bits = live[static_cast<std::size_t>(2 * layer + 2)];  // after the layer's MLP (index 0: the embedding)
    for (auto& [name, u] : units[static_cast<std::size_t>(layer)]) {
      l.key_heads += u.key_heads;
      l.units.push_back(std::move(u));
    }
    r.layers.push_back(std::move(l));
  }
  return r;
}

}  // namespace qgpu::weights
