// Circuit unit: the operands a, b, c of ONE instruction slot, every lane, with
// bypass from earlier slots of the same block and the special values
// (docs/ISA.md §2, §5, §6; docs/MACHINE_CIRCUIT.md §2, §8).
//
// Per lane l and operand o, the value is, in this order of precedence:
//   * kind imm: the immediate; kind special: %tid / %laneid = warp·4 + l, or the
//     %ntid / %ctaid / %nctaid words of the input (control's latches); special
//     numbers >= 5 and kind 3 give 0;
//   * kind reg, register f, lane l active (EXEC mask): the result of the LATEST
//     earlier slot j whose opcode writes d (unit alu, mul, load, atomic,
//     shuffle — ballot included) with d_j == f, f != 0;
//   * otherwise register f of lane l from the register file (r0 reads 0). An
//     inactive lane executes nothing (ISA.md §5), so its registers are the file's
//     rows: that is what a shuffle reads from it.
//
// Schedule (each step placed by data dependence, so the caller chooses where the
// reads land through `after` and through when the earlier results are final):
//   MLP  (decode + 1)  bypass match, per operand and earlier slot j:
//                      hit_j = [f == d_j ∧ writes_j ∧ kind reg] as two steps on
//                      Σ2^i f_i + Σ2^i ¬d_i + 16·writes_j + 16·¬k0 + 16·¬k1; nz = [f ≠ 0]
//   MLP  (decode + 2)  take_j = hit_j ∧ ¬hit_(j+1..s-1) ∧ nz (one selector each),
//                      keep_l = kind reg ∧ (¬active_l ∨ no hit) (two selectors);
//                      with `after`, the keep selectors also read that bit (twice the
//                      neurons, same value), so they and the reads wait for it
//   GDN  L             read of row (warp, f) of lane l's register RAM, z gate = keep_l:
//                      the read is exactly 0 wherever the operand is not the register
//   MLP  L             select, in place on the read (one MLP after the reads):
//                      out += Σ_j take_j·active_l·result_j + [imm]·imm + [special]·value
// Slot 0 needs no match (keep is the kind alone, from the fetched row); operand c
// of slot 0 is the read itself (no select).
// defer_last (the machine's terminator): the select leaves out the last earlier
// slot, so it does not wait for that slot's value; the operand is then 0 in every
// lane that slot bypasses and `take_last` (one bit per operand) tells the caller to
// add the value itself (the terminator folds it into [a != 0]). The earlier slots'
// values can then die at this select instead of living through the last slot.
// Placing the reads: `after` final at MLP L-2 (e.g. the flags the previous slot's
// ALU writes in its first MLP) and earlier results final at MLP L-1 give reads in
// GDN L and the select in MLP L, so the 384 read bits live for one layer only.
// Cost per slot s (measured, tests/circuit_operands_test.cpp; a, b, c, 4 lanes):
// 12 key heads (one per lane and operand), select MLP 264 + 384·s neurons (280,
// 648, 1,032, 1,416), match + take/keep 0 / 53 / 65 / 77 neurons; fields: the
// 3 × 128 operand bits (the reads, overwritten in place) + 6·s + 15 bits of
// control, 3·s + 12 of them live until the select (2 for slot 0).
// Every neuron is gated by `enable`; on other tokens every output and every
// control bit stays exactly 0 and the unit has no state of its own (it only
// reads the register RAMs).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "fetch_decode.h"
#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"
#include "register_file.h"

namespace qgpu::simt::circuit {

// An earlier slot of the same block, as the operand select sees it.
struct EarlierSlot {
  weights::Word opcode;                          // kOpCount bits, one-hot (SlotFields::opcode)
  weights::Word d;                               // 4 bits: its destination register
  std::array<weights::Word, kProtoLanes> value;  // 32 bits per lane: its result (may be empty: defer_last)
};

struct OperandsIn {
  std::string owner = "ops";                          // owner of the unit's fields; unique per slot (e.g. "ops.s2")
  weights::Bit enable;                                // exec.is: every neuron is off where it is 0
  std::array<int, kProtoLanes> rams{-1, -1, -1, -1};  // the register file's lane RAMs (RegisterFile::rams)
  weights::Word warp;                                 // 3 bits: the EXEC's warp (row = warp·16 + register)
  weights::Word lanes;                                // 4 bits: the EXEC's lane mask
  weights::Word a, b, c;                              // 4 bits each: register / special numbers
  weights::Word ak, bk;                               // 2 bits each: the raw kind fields (0 reg, 1 imm, 2 special)
  weights::Word imm;                                  // 32 bits
  weights::Word ntid, ctaid, nctaid;                  // 32 bits each (Control::ntid, ...)
  std::vector<EarlierSlot> earlier;                   // the slots before this one, in slot order
  bool want_a = true, want_b = true, want_c = true;   // which operands to build
  // When set, the register reads (and the keep bits) are placed after this bit is final.
  std::optional<weights::Bit> after;
  // The last earlier slot's value is not added here (its `value` may be empty): each
  // operand is then exactly 0 in a lane where that slot bypasses it (take_last ∧ active),
  // and the caller adds take_last ∧ lanes[l] · value itself once it exists. The select no
  // longer waits for that slot, so the earlier slots' values can die before it runs.
  bool defer_last = false;
};

struct OperandsOut {
  // Per lane: 32-bit operands (empty where not wanted). Each is the in-place alias
  // of its register read (owner "regs", named <owner>.lane<L>.<a|b|c>).
  std::array<weights::Word, kProtoLanes> a, b, c;
  // defer_last: per operand a, b, c, the bit "the last earlier slot bypasses this operand"
  // (exec-gated; c.zero() for an operand not built). Empty otherwise.
  weights::Word take_last;
};

// Adds the operand select of one slot to `c`. Errors name the input of the wrong width.
sdk::Expected<OperandsOut> build_operands(weights::Circuit& c, const OperandsIn& in);

// The inputs of slot `slot` as fetch/decode and the register file provide them
// (enable, warp, lanes, fields, kinds, imm, RAMs); the caller adds the specials,
// the earlier slots, the owner and `after`.
OperandsIn operands_in(const FetchDecode& fd, const RegisterFile& rf, int slot);
// An earlier slot from its decoded fields and its per-lane results.
EarlierSlot earlier_slot(const SlotFields& s, const std::array<weights::Word, kProtoLanes>& value);

}  // namespace qgpu::simt::circuit
