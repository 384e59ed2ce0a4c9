// What a machine's circuit uses, layer by layer and unit by unit (`qgpu-host circuit`):
// plain data that a machine plugin hands to the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgpu/sdk/base_model.h"

namespace qgpu::sdk {

// One unit's share of a layer. A unit is the owner of the fields its operations write
// ("alu", "mem", "control", ...), as the machine names them.
struct CircuitUnitUse {
  std::string unit;
  std::int64_t mlp_neurons = 0;  // of the layer's MLP (a neuron two operations share counts for the first)
  std::int64_t key_heads = 0;    // Gated DeltaNet q/k heads (each with its value heads)
};

struct CircuitLayer {
  std::int64_t mlp_neurons = 0;    // the layer's MLP holds (identical neurons merged): units' + clears
  std::int64_t clear_neurons = 0;  // of them, clearing dead fields' channels for reuse
  std::int64_t key_heads = 0;
  std::int64_t live_bits = 0;        // residual channels live after the layer (the larger token mode's)
  std::vector<CircuitUnitUse> units;  // units with anything in this layer, by name
};

// A circuit as compiled for one engine and one set of layer shapes.
struct CircuitReport {
  std::string name;  // the circuit's name
  std::string engine;  // "circuit" or "model" (compiled for the merge: a mute direction, amplified choice)
  LayerShapes shapes;
  int mute_width = 0;  // channels reserved for the mute direction (0: none)
  std::int64_t fields = 0;
  std::int64_t operations = 0;
  std::int64_t rams = 0;
  std::int64_t channels_used = 0;  // of shapes.hidden_size (constants and pads included)
  std::int64_t live_peak = 0;      // the most residual channels live at once
  std::vector<CircuitLayer> layers;
};

}  // namespace qgpu::sdk
