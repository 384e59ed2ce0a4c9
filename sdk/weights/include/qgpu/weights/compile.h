// Compiling a circuit into Qwen3.5-shaped layers:
//   validate -> schedule (ops to layers, per-layer budgets) -> allocate
//   (fields to residual channels, optionally reused over live ranges with
//   clear neurons; norm padding) -> emit (sparse weights).
// The schedule and the allocation can be dumped to an explicit directory as
// schedule.yaml / allocation.yaml and loaded back to reproduce a compile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "qgpu/sdk/base_model.h"
#include "qgpu/weights/circuit.h"
#include "qgpu/weights/model.h"

namespace qgpu::weights {

// Qwen3.5-2B's linear-attention layer shapes (QWEN35.md): hidden 2048, MLP 6144,
// 16 key and 16 value heads of 128, conv kernel 4 — the default target.
inline sdk::LayerShapes qwen35_2b_shapes() {
  sdk::LayerShapes s;
  s.hidden_size = 2048;
  s.intermediate_size = 6144;
  s.linear_num_key_heads = 16;
  s.linear_num_value_heads = 16;
  s.linear_key_head_dim = 128;
  s.linear_value_head_dim = 128;
  s.linear_conv_kernel = 4;
  s.rms_norm_eps = 1e-6;
  return s;
}

struct Target {
  sdk::LayerShapes shapes;  // hidden size, heads, dk/dv, MLP width, conv kernel of the base
  int max_layers = 0;       // 0: no limit
  // A channel that is exactly 0 on circuit tokens (and negative on text tokens,
  // arranged by the embedding builder) with this gain on every MLP gate, beta
  // and z: silences the circuit on text (ARCHITECTURE.md §4). The value channels
  // of previous() heads carry it too, so a text token in the conv window reads
  // as 0 there, as a fresh state does. Off by default.
  bool mute_channel = false;
  double mute_gain = 0x1p100;
  // With mute_channel: the mute channel's residual index (-1: channel 1, after the
  // bias channel). Every other channel keeps its order around it.
  int mute_index = -1;
  // With mute_channel: channels the merge may spread the mute over — the mute channel
  // and mute_width - 1 more at the top of the residual that no field, constant or pad
  // takes (Allocation::free lists every channel left free).
  int mute_width = 1;
  // Liveness-based channel reuse (docs/CIRCUITS.md §4): when the fields do not all
  // fit the residual at once, a dead field's channels go to a later field, after
  // clear neurons (1 per bit) inserted into an MLP between its last reader and
  // the next writer return them to the placeholder 0 (-u).
  bool reuse_channels = true;
  // With reuse on: reuse dead channels even when fresh ones are left (minimises
  // the peak, costs clear neurons). Off: reuse only when the circuit would not fit.
  bool reuse_eagerly = false;
  // With reuse on: a field that no op reads is read back after the last layer and
  // keeps its channels (off: only fields marked with Circuit::mark_output do).
  bool keep_unread_fields = true;
};

struct LayerUse {
  std::int64_t mlp_neurons = 0;  // after deduplication
  std::int64_t key_heads = 0;    // Gated DeltaNet q/k heads (each with nv/nk value heads)
};

struct Schedule {
  int num_layers = 0;
  std::vector<int> op_layer;       // per op of the circuit
  std::vector<int> op_first_head;  // per GDN op: first q/k head; -1 for MLP ops
  std::vector<LayerUse> use;
};

// Sub-layer indices: -1 = the embedding, 2L = layer L's Gated DeltaNet, 2L+1 = its MLP.
// The live range of a slot (a field with its aliases): it holds a value from
// `start` (the first sub-layer writing it; -1 for inputs, constants and fields
// read before they are written) to its last reader, or `forever` (constants and
// outputs). Only an MLP can clear it: the first at or after free_from() (a read
// and the clear can share an MLP, both see the residual before it), so its
// channels are taken after sub-layers start .. clear_from()-1 and a later slot
// may have them from clear_from() on (an MLP writer shares the clear's MLP).
struct LiveRange {
  int root = -1;
  int start = -1;
  int last_read = -2;   // -2: never read
  int last_write = -2;  // -2: never written (inputs, constants)
  bool forever = false;
  int free_from() const { return last_read > last_write + 1 ? last_read : last_write + 1; }
  int clear_from() const { return (free_from() < 1 ? 1 : free_from()) | 1; }
  bool live_after(int sublayer) const { return start <= sublayer && (forever || sublayer < clear_from()); }
};
// Per field (an alias gets its slot's range).
std::vector<LiveRange> live_ranges(const Circuit& circuit, const Target& target, const Schedule& schedule);

// Token modes (Circuit::declare_mode_bit; docs/CIRCUITS.md §4, "Token modes"), per field: +1 when
// the field may share channels with a -1 field while both are live, -1 likewise, 0 never.
// A field has mode +1 (-1) when it is exactly 0 wherever the mode bit e is 0 (1) — a
// computed field, not overwritten, every writer gated by e (!e) or by a positive bit of
// a field of the same mode — and every reader is gated the same way: an MLP by its
// guard, a read port's address by its enable, a RAM's write data and address by its
// write enable; a field read at a lag (previous), used as a gate or write enable, or
// read back after the last layer is never shared. With channel reuse, the allocator
// lets +1 and -1 fields overlap and gates each one's clear by its mode, so that the
// clear of one leaves the other's bit on the channel untouched.
std::vector<int> field_modes(const Circuit& circuit);

// A slot cleared back to the placeholder 0 (-u): one neuron per bit, silu(K(2x-1))
// into its channel with -2u/K, in the MLP of `layer` (a slot holding 0 gets 0; gated by
// the slot's token mode when it has one, field_modes).
struct ChannelClear {
  int field = -1;  // a field of the slot (the dumps name its last alias)
  int layer = 0;
};

// Residual channels of every field: bit b of field f lives on one channel,
// field_base[f] + b (or bit_channel[f][b]), holding +u for 1 and -u for 0
// (aliases share their root's). Every bit thus adds exactly u^2 to the sum of
// squares whatever its value, and after the input norm it reads as x = +-1:
// b = (1 + x) / 2 and NOT b = (1 - x) / 2 (docs/CIRCUITS.md, "residual norm").
// With channel reuse, fields whose live ranges do not overlap share channels.
struct Allocation {
  std::int64_t hidden_size = 0;
  int const_hi = 0;       // channel holding normalized kConstHi (biases)
  int mute = -1;          // mute channel or -1
  std::vector<int> free;  // channels that nothing of the circuit uses (ascending; the mute channel excluded)
  std::vector<int> field_base;
  std::vector<int> pad_channel;
  std::vector<double> pad_value;  // normalized
  int channels_used = 0;
  std::vector<ChannelClear> clears;  // channel reuse: where dead slots are cleared
  int live_peak = 0;                 // most bits (channels) live at once (0 if not computed)
  // Channel reuse may scatter a field over free channels: then bit_channel[f][b] is bit b's
  // channel (empty for contiguous fields; the whole vector is empty when none is scattered).
  std::vector<std::vector<int>> bit_channel;
  int channel(Bit b) const {
    if (static_cast<std::size_t>(b.field) < bit_channel.size() && !bit_channel[b.field].empty())
      return bit_channel[b.field][b.bit];
    return field_base[b.field] + b.bit;
  }
};

// w times bit b's 0/1 value, read from the normalized residual: a weight on the
// bit's channel plus a constant (normalized units) that the caller adds through
// the constant channels.
struct BitRead {
  int channel = 0;
  double weight = 0;
  double bias = 0;
};
inline BitRead read_bit(const Allocation& a, Bit b, double w) {
  return BitRead{a.channel(b), b.neg ? -w / 2 : w / 2, w / 2};
}
// The weight on b's channel that changes b's 0/1 value by w (in units of u):
// its channel moves by 2w·u (NOT b: by -2w·u).
inline double write_weight(Bit b, double w) {
  return b.neg ? -2 * w : 2 * w;
}

inline constexpr double kConstHi = 1;  // normalized value of the bias channel

sdk::Expected<Schedule> schedule(const Circuit& circuit, const Target& target);
// Checks a (possibly loaded or hand-edited) schedule: every op after its inputs,
// no head used twice, per-layer budgets. emit() calls it first.
sdk::Status check_schedule(const Circuit& circuit, const Target& target, const Schedule& schedule);
// Neurons of an MLP op after merging identical ones.
std::int64_t unique_neuron_count(const MlpOp& op);
sdk::Expected<Allocation> allocate(const Circuit& circuit, const Target& target);
// With the schedule: live ranges known, so Target::reuse_channels can share channels.
sdk::Expected<Allocation> allocate(const Circuit& circuit, const Target& target, const Schedule& schedule);
// Neurons of the allocation's clears in `layer` (-1: all layers), before merging.
std::int64_t clear_neurons(const Circuit& circuit, const Allocation& allocation, int layer = -1);
// Checks a (possibly loaded or hand-edited) allocation against the schedule: no two
// slots live at once on a channel, every reused channel cleared in an MLP between
// its fields, clears within each layer's neuron budget, the norm's sum of squares.
// emit() calls it.
sdk::Status check_allocation(const Circuit& circuit, const Target& target, const Schedule& schedule,
                             const Allocation& allocation);
sdk::Expected<std::vector<Layer>> emit(const Circuit& circuit, const Target& target, const Schedule& schedule,
                                       const Allocation& allocation);

// Where a RAM's rows live in the Gated DeltaNet state (docs/CIRCUITS.md §3), so that
// they can be read back without a token (read_ram in state.h). Every read port is a
// replica holding every row: in layer `layer`, value heads first_value_head ..
// first_value_head + value_heads - 1, each state matrix S [dk][dv]. Row r is key row
// r of each of them (the write key and the read query are one-hot e_r built from the
// address), and bit b lies in value head first_value_head + b / bits_per_head at value
// channel 2·(b % bits_per_head) (its 1 rail) and the next one (its 0 rail), stored as
// U = 64; a short last head holds constant-one pads (U, 0) after the last bit, and
// channels from 2·bits_per_head on stay 0. A row never written is all zeros.
struct RamReplica {
  int op = -1;  // the read port's index in Circuit::ops()
  int layer = 0;
  int first_value_head = 0;
  int value_heads = 0;
  int addr_bits = 0;  // width of the read address the query is built from
};
struct RamPlacement {
  std::string name;  // owner.name
  int rows = 0;
  int width = 0;
  int bits_per_head = 0;             // dv / 4
  std::vector<RamReplica> replicas;  // in op order; empty when no port reads the RAM (no state holds it)
};
// The placement of every RAM of the circuit (index = Circuit::rams() index) under `schedule`.
std::vector<RamPlacement> ram_placements(const Circuit& circuit, const Target& target, const Schedule& schedule);

// The channels a target lets the allocation use: the hidden size less those reserved for
// the mute direction (Target::mute_width).
std::int64_t channel_limit(const Target& target);
// Fills allocation.free: every channel that no field bit (at any time), constant, pad or
// the mute channel uses.
void mark_free_channels(const Circuit& circuit, Allocation& allocation);

struct CompiledCircuit {
  Target target;
  Schedule schedule;
  Allocation allocation;
  std::vector<Layer> layers;
  std::vector<RamPlacement> rams;  // per Circuit::rams() index (ram_placements)
  std::int64_t total_neurons() const;
};

// The whole pipeline; errors name the layer and the resource that overflowed.
sdk::Expected<CompiledCircuit> compile(const Circuit& circuit, const Target& target);

// Writes dir/schedule.yaml and dir/allocation.yaml (the directory must exist).
sdk::Status dump(const Circuit& circuit, const CompiledCircuit& compiled, const std::filesystem::path& dir);
sdk::Expected<Schedule> load_schedule(const Circuit& circuit, const std::filesystem::path& file);
sdk::Expected<Allocation> load_allocation(const Circuit& circuit, const std::filesystem::path& file);
// Loads and checks the allocation against `schedule` (check_allocation).
sdk::Expected<Allocation> load_allocation(const Circuit& circuit, const Target& target, const Schedule& schedule,
                                          const std::filesystem::path& file);

// The raw residual (an embedding row) of a circuit token: constants, every
// computed field at its placeholder 0, inputs set from `values` (word, value).
std::vector<float> embed(const Circuit& circuit, const Allocation& allocation,
                         const std::vector<std::pair<Word, std::uint64_t>>& values);
// Reads a word back from a residual; `exact` (if given) becomes false when any
// bit's channel is not exactly +u or -u.
std::uint64_t read_word(const Allocation& allocation, const std::vector<float>& x, const Word& word,
                        bool* exact = nullptr);

}  // namespace qgpu::weights
