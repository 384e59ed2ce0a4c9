// Reading a RAM's rows back out of the Gated DeltaNet recurrent state, without
// a token (docs/PROTOCOL.md §5: how the host reads a launch's global memory).
//
// A RAM (Circuit::add_ram) lives in one or more replicas, each a group of value
// heads of one layer (CompiledCircuit::rams records where). read_ram() reads
// row r the way a read port of the circuit would: it builds the query of
// address r as the compiler builds read keys (pre-SiLU A·(matching address
// rails − (n − 1)), SiLU, l2norm, ·1/√dk), retrieves o = Sᵀq, applies the
// gated RMSNorm with the layer's calibrated weight in the model's dtype (the
// output gate z is open: silu(Z)·u/Z = u), and takes each dual-rail pair as a
// bit. A pair must read exactly (1, 0) or (0, 1) and every other channel of the
// head exactly as the compiler left it; a row whose heads are all zero was
// never written and reads 0. Anything else is an error naming the RAM, the
// row, the bit and the values seen — never a guess.
//
// The state is passed as a plain view (pointer + shape + strides per layer), so
// a tensor backend can hand over its fp32 recurrent-state tensors without this
// library depending on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgpu/sdk/status.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::weights {

// One layer's fp32 recurrent state S: [value heads][dk][dv], i.e. HF's
// recurrent_state [1, nv, dk, dv] without the batch axis (S = Σ k vᵀ: row i of
// head h is what the one-hot key e_i retrieves). Strides in elements; all zero
// means contiguous row-major. A transposed (Sᵀ) store is expressed by swapping
// the last two strides.
struct LayerStateView {
  const float* data = nullptr;  // nullptr: this layer's state is not available
  std::int64_t value_heads = 0;
  std::int64_t key_dim = 0;
  std::int64_t value_dim = 0;
  std::int64_t strides[3] = {0, 0, 0};

  float at(std::int64_t head, std::int64_t key, std::int64_t value) const {
    const bool contiguous = strides[0] == 0 && strides[1] == 0 && strides[2] == 0;
    const std::int64_t s0 = contiguous ? key_dim * value_dim : strides[0], s1 = contiguous ? value_dim : strides[1],
                       s2 = contiguous ? 1 : strides[2];
    return data[head * s0 + key * s1 + value * s2];
  }
};

// The state of every layer of a compiled circuit (index = CompiledCircuit::layers
// index) and the dtype the model ran in (the readout rounds as the layer does).
struct StateView {
  DType dtype = DType::kF32;
  std::vector<LayerStateView> layers;
};

struct RamReadOptions {
  int row = -1;      // -1: every row (result index = row); else only this row (one word)
  int replica = -1;  // -1: every replica, which must agree; else only this one (CompiledCircuit::rams[ram].replicas)
  int first_bit = -1;  // -1: the whole row (up to 64 bits); else bits [first_bit, first_bit + 64) of a wider row
};

// The rows of RAM `ram` (Circuit::rams() index) as words, bit b of the row in
// bit b of the word (widths up to 64; wider rows a 64-bit window at a time, options.first_bit;
// every bit of the row is still checked).
sdk::Expected<std::vector<std::uint64_t>> read_ram(const CompiledCircuit& cc, int ram, const StateView& state,
                                                   const RamReadOptions& options = {});
// The index of the RAM named "owner.name" in cc.rams.
sdk::Expected<int> find_ram(const CompiledCircuit& cc, const std::string& name);

}  // namespace qgpu::weights
