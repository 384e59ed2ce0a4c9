// qgpu-host circuit: the machine's circuit as an engine compiles it, layer by layer and
// unit by unit (Machine::describe_circuit), as text, JSON or the Markdown tables that
// docs/MACHINE_CIRCUIT.md embeds.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "qgpu/core/merged_model.h"
#include "qgpu/core/plugin_registry.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::host {
namespace {

// 72380 -> "72,380".
std::string digits(std::int64_t n) {
  std::string s = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return n < 0 ? "-" + s : s;
}

// "alu 2,538 · mem 12 h · control 96 + 3 h": a layer's units, neurons then key heads.
std::string units_text(const sdk::CircuitLayer& layer) {
  std::string text;
  for (const auto& u : layer.units) {
    std::string use;
    if (u.mlp_neurons > 0) use = digits(u.mlp_neurons);
    if (u.key_heads > 0) use += (use.empty() ? "" : " + ") + digits(u.key_heads) + " h";
    text += (text.empty() ? "" : " · ") + u.unit + " " + use;
  }
  return text;
}

struct UnitTotal {
  int first = -1, last = -1, layers = 0;
  std::int64_t mlp_neurons = 0, key_heads = 0;
};

std::map<std::string, UnitTotal> unit_totals(const sdk::CircuitReport& r) {
  std::map<std::string, UnitTotal> totals;
  for (std::size_t l = 0; l < r.layers.size(); ++l)
    for (const auto& u : r.layers[l].units) {
      UnitTotal& t = totals[u.unit];
      if (t.first < 0) t.first = static_cast<int>(l);
      t.last = static_cast<int>(l);
      ++t.layers;
      t.mlp_neurons += u.mlp_neurons;
      t.key_heads += u.key_heads;
    }
  return totals;
}

struct Totals {
  std::int64_t mlp_neurons = 0, clear_neurons = 0, key_heads = 0;
};

Totals totals(const sdk::CircuitReport& r) {
  Totals t;
  for (const auto& l : r.layers) {
    t.mlp_neurons += l.mlp_neurons;
    t.clear_neurons += l.clear_neurons;
    t.key_heads += l.key_heads;
  }
  return t;
}

std::string summary(const sdk::CircuitReport& r) {
  const Totals t = totals(r);
  std::string line = "the " + r.name + " circuit for --engine " + r.engine + ": " + std::to_string(r.layers.size()) +
                     " layers, " + digits(t.mlp_neurons) + " MLP neurons (" +
                     digits(t.clear_neurons) + " of them clearing channels for reuse), " + digits(t.key_heads) +
                     " key heads, " + digits(r.channels_used) + " of " + digits(r.shapes.hidden_size) +
                     " channels (live peak " + digits(r.live_peak) + " bits";
  if (r.mute_width > 0) line += "; " + std::to_string(r.mute_width) + " kept for the mute direction";
  return line + "); " + digits(r.fields) + " fields, " + digits(r.operations) + " operations, " + digits(r.rams) +
         " RAMs";
}

void print_text(const sdk::CircuitReport& r) {
  std::printf("%s\n", summary(r).c_str());
  std::printf("at hidden %lld, MLP %lld, %lld key / %lld value heads of %lld / %lld\n\n",
              static_cast<long long>(r.shapes.hidden_size), static_cast<long long>(r.shapes.intermediate_size),
              static_cast<long long>(r.shapes.linear_num_key_heads),
              static_cast<long long>(r.shapes.linear_num_value_heads),
              static_cast<long long>(r.shapes.linear_key_head_dim),
              static_cast<long long>(r.shapes.linear_value_head_dim));
  std::printf("%5s %8s %7s %6s %6s  %s\n", "layer", "neurons", "clears", "heads", "live", "units (neurons + key heads)");
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    const auto& layer = r.layers[l];
    std::printf("%5zu %8s %7s %6s %6s  %s\n", l, digits(layer.mlp_neurons).c_str(),
                digits(layer.clear_neurons).c_str(), digits(layer.key_heads).c_str(), digits(layer.live_bits).c_str(),
                units_text(layer).c_str());
  }
  std::printf("\n%-12s %7s %6s %9s %6s\n", "unit", "layers", "span", "neurons", "heads");
  for (const auto& [unit, t] : unit_totals(r))
    std::printf("%-12s %7d %6s %9s %6s\n", unit.c_str(), t.layers,
                (std::to_string(t.first) + "-" + std::to_string(t.last)).c_str(), digits(t.mlp_neurons).c_str(),
                digits(t.key_heads).c_str());
}

void print_markdown(const sdk::CircuitReport& r) {
  std::printf("%s.\n\n", summary(r).c_str());
  std::printf("| unit | layers | first–last | MLP neurons | key heads |\n|---|---:|---:|---:|---:|\n");
  for (const auto& [unit, t] : unit_totals(r))
    std::printf("| %s | %d | %d–%d | %s | %s |\n", unit.c_str(), t.layers, t.first, t.last,
                digits(t.mlp_neurons).c_str(), digits(t.key_heads).c_str());
  std::printf("\n| layer | MLP neurons | clears | key heads | live bits | units (neurons + key heads) |\n"
              "|---:|---:|---:|---:|---:|---|\n");
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    const auto& layer = r.layers[l];
    std::printf("| %zu | %s | %s | %s | %s | %s |\n", l, digits(layer.mlp_neurons).c_str(),
                digits(layer.clear_neurons).c_str(), digits(layer.key_heads).c_str(),
                digits(layer.live_bits).c_str(), units_text(layer).c_str());
  }
}

void print_json(const sdk::CircuitReport& r) {
  nlohmann::ordered_json j;
  j["circuit"] = r.name;
  j["engine"] = r.engine;
  j["shapes"] = {{"hidden_size", r.shapes.hidden_size},
                 {"intermediate_size", r.shapes.intermediate_size},
                 {"linear_num_key_heads", r.shapes.linear_num_key_heads},
                 {"linear_num_value_heads", r.shapes.linear_num_value_heads},
                 {"linear_key_head_dim", r.shapes.linear_key_head_dim},
                 {"linear_value_head_dim", r.shapes.linear_value_head_dim}};
  j["mute_width"] = r.mute_width;
  j["fields"] = r.fields;
  j["operations"] = r.operations;
  j["rams"] = r.rams;
  j["channels_used"] = r.channels_used;
  j["live_peak"] = r.live_peak;
  const Totals t = totals(r);
  j["mlp_neurons"] = t.mlp_neurons;
  j["clear_neurons"] = t.clear_neurons;
  j["key_heads"] = t.key_heads;
  auto layers = nlohmann::ordered_json::array();
  for (const auto& layer : r.layers) {
    auto units = nlohmann::ordered_json::array();
    for (const auto& u : layer.units)
      units.push_back({{"unit", u.unit}, {"mlp_neurons", u.mlp_neurons}, {"key_heads", u.key_heads}});
    layers.push_back({{"mlp_neurons", layer.mlp_neurons},
                      {"clear_neurons", layer.clear_neurons},
                      {"key_heads", layer.key_heads},
                      {"live_bits", layer.live_bits},
                      {"units", units}});
  }
  j["layers"] = layers;
  std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace

int run_circuit(const core::Host& host, const CircuitOptions& options) {
  auto machine = host.instantiate<sdk::Machine>();
  if (!machine) return report(machine.error());
  const std::string machine_name = host.select(QGPU_PLUGIN_MACHINE)->plugin->name;
  sdk::CircuitRequest request;
  request.engine = options.engine == "circuit" ? sdk::Engine::kCircuit : sdk::Engine::kModel;  // CLI: one of the two
  if (request.engine == sdk::Engine::kModel) request.mute_width = core::kMuteWidth;  // what a merge reserves
  std::fprintf(stderr, "qgpu-host: building and compiling %s's circuit for --engine %s (about 30 s)\n",
               machine_name.c_str(), options.engine.c_str());
  auto described =
      core::guarded_call(machine_name, "describe_circuit()", [&] { return (*machine)->describe_circuit(request); });
  if (!described) return report(described.error());
  if (options.json)
    print_json(*described);
  else if (options.markdown)
    print_markdown(*described);
  else
    print_text(*described);
  return kExitOk;
}

}  // namespace qgpu::host
