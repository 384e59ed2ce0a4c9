// Circuit unit: the ALU of one instruction slot, all 4 lanes, in 2 MLP layers.
//
// For every kUnitAlu row of isa.def (mov, add, sub, and, or, xor, not, shl,
// shr, sra, min, max, minu, maxu, set*, sel) each lane's d is exactly
// simt::eval(op, a, b, c); for any other opcode, no opcode bit, or enable = 0
// it is exactly 0 (and with enable = 0 no field changes at all).
//
// The opcode is never decoded into per-operation results: it sits in the up
// projection (or the gate) of the neurons that compute the result, so one
// adder, one carry chain and one shifter serve every operation.
//
// Layer 1 (MLP), per lane, into a 32-bit scratch word x and 12 flag bits:
//   adder digits for a + b (add) and a + ~b + 1 (sub, compares) — the two
//   paths are separate neurons whose up is the opcode group, so no b' field:
//   group 0 (bits 0-7) final sum bits, groups 1-3 local sums, per-group
//   generate/propagate G/P (the top group also sign-flipped for the signed
//   compares), two more thresholds of group 0 for == and b - a;
//   shift stage 1: x = a (shl) or reverse(a) (shr, sra) shifted left by
//   b[1:0] (sra fills with a[31]); big = b >= 32; cnz = c != 0.
// Layer 2 (MLP), per lane, overwriting x in place with d (no result channels
//   beyond x): carry-select of the adder's upper groups, set* (one threshold
//   each on the carry chain), min/max/sel as b + cond·(a - b), logic ops
//   from a and b, shift stage 2 by b[4:2] (reversed back for shr/sra).
// Cost, 4 lanes (measured by tests/circuit_alu_test.cpp): 2 layers, 0 heads,
// 2,499 + 2,577 MLP neurons; its own fields are d (4 x 32 bits, the slot of x)
// and the flags (4 x 12 bits, dead after layer 2).
#pragma once

#include <array>
#include <string>

#include "isa.h"
#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"

namespace qgpu::simt::circuit {

struct AluLaneIn {
  weights::Word a, b, c;  // 32 bits each (c is read by sel only)
};

struct AluIn {
  std::string owner = "alu";  // owner of the unit's fields; unique per ALU in a circuit (e.g. "alu.s0")
  weights::Bit enable;        // exec.is in the machine: every neuron is off where it is 0
  weights::Word opcode;       // kOpCount bits, one-hot, bit i = opcode i (SlotFields::opcode)
  std::array<AluLaneIn, kProtoLanes> lane;
};

struct AluOut {
  // Per lane: the 32-bit result (owner.lane<L>.d), written in the unit's second MLP layer.
  std::array<weights::Word, kProtoLanes> d;
};

// Adds the ALU to `c`. Errors name the input of the wrong width.
sdk::Expected<AluOut> build_alu(weights::Circuit& c, const AluIn& in);

}  // namespace qgpu::simt::circuit
