// Circuit unit: the shuffles and ballot of one instruction slot, all 4 lanes
// (docs/ISA.md §4: shfl.idx, shfl.up, shfl.down, shfl.bfly, ballot).
//
// Per lane L, with w = 1 << flags[2:1] (width code 3 = 8 is taken as the
// interpreter takes it) and B = operand b of lane L as unsigned:
//   shfl.*  source lane j and "in range" as interp.cpp computes them; an
//           out-of-range j, or j >= machine_lanes, reads the lane's own value;
//           d = a of lane j (whatever lane j's state: the operand stage gives
//           an inactive lane's register row), or with flags[3] d = in range;
//   ballot  d = Σ over active lanes l with a_l != 0 of 1 << l.
// d is exactly 0 in an inactive lane, for every other opcode (so the machine
// can add d to the ALU's result), for no opcode and where enable = 0; with
// enable = 0 no field changes at all.
//
// Only (width code, b[2:0], b >= 8) matter for the source lane: the builder
// enumerates that table per lane from the interpreter's rule and covers each
// "source j != L" and "in range" set with disjoint cubes (one selector neuron
// each; b >= 8 never puts a source in range except for shfl.idx, so the cubes
// need only "b[31:3] == 0", a conjunction).
// Schedule (2 MLP layers, the default):
//   MLP 1  src: per lane L and source j != L one bit, 1 iff lane L is active,
//          the opcode is a shuffle without the predicate flag and L reads
//          lane j (one selector neuron per cube, 12 bits in all).
//   MLP 2  d, per lane L and bit i: own·a_L[i] (one selector on active_L ∧
//          shuffle opcode ∧ ¬flags[3]) + Σ_{j≠L} src_Lj·(a_j[i] − a_L[i]);
//          predicate cubes into bit 0; ballot bit l of lane L as the step
//          [Σ a_l + 64·(ballot + active_L + active_l) >= 193] (2 neurons).
// single_layer = true folds MLP 1 into MLP 2 (every cube times every bit of
// a_j − a_L): one layer, no src field, about 3 times the neurons.
// Cost, 4 lanes (measured by tests/circuit_shuffle_test.cpp): 2 layers, 0 heads,
// 51 + 579 MLP neurons (512 value selectors, 32 ballot, 35 predicate cubes);
// its fields are d (4 x 32 bits) and src (12 bits, dead after MLP 2).
// single_layer: 1 layer, 1,827 neurons, d only. Every switch margin is 128.
// also_add folds the slot's exclusive add of results into the last MLP.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "isa.h"
#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"

namespace qgpu::simt::circuit {

struct ShuffleIn {
  std::string owner = "shfl";                // owner of the unit's fields; unique per slot (e.g. "shfl.s1")
  weights::Bit enable;                       // exec.is in the machine: every neuron is off where it is 0
  weights::Word opcode;                      // kOpCount bits, one-hot, bit i = opcode i (SlotFields::opcode)
  weights::Word flags;                       // 6 bits (SlotFields::flags): [2:1] log2 width, [3] predicate
  weights::Word lanes;                       // 4 bits: the EXEC mask (bit L = lane L active)
  std::array<weights::Word, kProtoLanes> a;  // 32 bits per lane: operand a (every lane, active or not)
  std::array<weights::Word, kProtoLanes> b;  // 32 bits per lane: operand b, the source-lane operand (unsigned)
  int machine_lanes = kProtoLanes;           // MachineConfig::lanes: a source lane >= this reads the own value
  bool single_layer = false;                 // one MLP layer at about 3x the neurons (see above)
  // Words (32 bits) added into d of lane L in the last MLP, one selector neuron per
  // bit, e.g. the slot's ALU, multiplier and load results: d is then the slot's
  // value and needs no separate exclusive add. Per bit at most one of them and the
  // shuffle result may be 1 on any token (their opcodes are exclusive). The last
  // MLP then waits until every one of them is final.
  std::array<std::vector<weights::Word>, kProtoLanes> also_add;
};

struct ShuffleOut {
  // Per lane: the 32-bit result (owner.lane<L>.d), written in the unit's last MLP layer.
  std::array<weights::Word, kProtoLanes> d;
};

// Adds the shuffle/ballot unit to `c`. Errors name the input of the wrong width
// and a machine_lanes outside 1..4.
sdk::Expected<ShuffleOut> build_shuffle(weights::Circuit& c, const ShuffleIn& in);

}  // namespace qgpu::simt::circuit
