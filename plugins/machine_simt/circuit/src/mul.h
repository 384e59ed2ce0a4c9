// The SIMT machine's multiplier (mul, mad) for the 4 lanes of a warp:
// d = low 32 bits of a·b (mul) or a·b + c (mad), 0 when neither opcode bit is
// set; every neuron is gated by `enable`, so on other tokens nothing is written.
//
// Per lane, 4 MLP layers (no Gated DeltaNet heads):
//   rows  radix-4 Booth rows of a selected by the 16 digits of b (6 selector
//         neurons per row bit, 272 bits) and c ∧ is_mad (32 bits); a negative
//         digit writes ~(|d|·a) and its +1 is b[2k+1] itself, an operand bit that
//         the next layer reads directly (digit pattern 111 is "-0" = ~0 + 1).
//   win   per 4-column window m: V_m = Σ row bits·2^(col-4m) + corrections,
//         at most 257, its bits by alternating thresholds (one step per value);
//         gated by is_mul + is_mad. The bits below the first column that two
//         windows share (d[0..3]) are final here.
//   sum1  the windows overlap pairwise: digit groups [4,8) [8,16) [16,24) [24,32)
//         of X + Y, each group's sum without carry-in, generate and propagate.
//   sum2  carry into group h = [Σ_{l<h} 2^l(G_l + P_l) >= 2^h], folded into the
//         sum bits (d[8..31]).
// The lanes run one layer apart and share three scratch slots: lane k's op
// overwrites lane k-1's value in the layer that reads it for the last time
// (1 clear neuron per bit), so 4 lanes take 7 layers and at most one lane's rows
// are alive at once. Measured (machine.CircuitMul.*): 7 layers, 13,326 neurons,
// at most 3,428 in a layer, 0 heads; scratch 304 + 52 + 30 bits; peak 430
// computed bits (860 channels) alive, the results included; exact in fp32 and
// bf16 with every switch margin 128.
#pragma once

#include <array>
#include <string>

#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"

namespace qgpu::simt::circuit {

// Where mad's addend c enters the window sums.
enum class MadAddend {
  kRow,      // c ∧ is_mad as a 17th row: 32 more scratch bits alive, 32 neurons
  kWindows,  // c read directly by a second, mad-only copy of the window neurons:
             // 32 fewer bits, 1,040 more neurons in each lane's window layer
};

struct MulIn {
  weights::Bit enable;                             // the unit runs on this token (exec.is in the machine)
  weights::Bit is_mul, is_mad;                     // decoded opcode bits (one-hot: never both set)
  std::array<weights::Word, kProtoLanes> a, b, c;  // 32 bits each, bit 0 first
  std::string owner = "mul";                       // fields: <owner>.lane<L>.d.{lo,mid,hi}, <owner>.rows.lane<L>, ...
  // Lanes computed side by side (1..4): lane k reuses the scratch of lane
  // k - parallel_lanes one layer later. 1: 7 layers, one lane's rows live at a
  // time; 2: 6 layers and twice the scratch; 4: 5 layers (6,144 neurons hold the
  // rows of 3 lanes), four times the scratch (measured in circuit_mul_test.cpp).
  int parallel_lanes = 1;
  MadAddend addend = MadAddend::kRow;
};

struct MulOut {
  std::array<weights::Word, kProtoLanes> d;  // 32 bits per lane
};

sdk::Expected<MulOut> build_mul(weights::Circuit& c, const MulIn& in);

}  // namespace qgpu::simt::circuit
