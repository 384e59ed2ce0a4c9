// The circuit library: exact digital logic as SwiGLU neurons (threshold
// logic) and Gated DeltaNet ports (RAM, earlier tokens). Every function states
// its math and its neuron cost; docs/CIRCUITS.md has the measured numbers.
//
// Notation: K = 128 (kGain). A bit's normalized value is 0 or 1; 2b-1 is
// (positive rail - negative rail), so "silu(K(2b-1))·x = K·b·x" costs one neuron.
// Every result is a new computed field named owner.name (intermediates get
// owner.name.<part>). Costs are before deduplication of identical neurons
// within a layer (compile() merges them and reports the real count).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qgpu/weights/circuit.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::weights {

// Collects neurons for one MLP operation.
class MlpBuilder {
 public:
  explicit MlpBuilder(Circuit& circuit) : circuit_(circuit) {}

  // Adds coef·[Σ terms ≥ t] (terms: integer weights on bits; t integer) to each
  // output bit (Term.weight = coef). Direct form silu(K(S-t+1)) - silu(K(S-t))
  // when max(S)-t <= 255, else the flipped form K - silu(K(t-S)) + silu(K(t-1-S))
  // when t-min(S) <= 256 (the constant K comes from the layer's one shared bias
  // neuron); otherwise the gate is not exact in bf16 and this fails, naming the
  // range. 2 neurons; 0 if the step is constant (1 shared bias neuron if it is 1).
  sdk::Status step(std::vector<Term> terms, double t, const std::vector<Term>& outs);
  // The same step times an up projection: up·[Σ terms ≥ t]. With up an exact 0/±1/±2 (a
  // group of one-hot opcode bits, say), the neurons act for those inputs only.
  sdk::Status step(std::vector<Term> terms, double t, const Affine& up, const std::vector<Term>& outs);
  // Adds coef·sel·x for a selector that is exactly 1 when Σ match terms equals
  // its maximum: silu(K(2·Σ m - 2·|m| + 1))·x. 1 neuron.
  void select(const std::vector<Bit>& match, const Affine& x, const std::vector<Term>& outs);
  // A selector over groups: 1 when every group has a bit that is 1, where each group
  // holds at most one 1 (one bit, or a set of one-hot opcode bits):
  // silu(K(2·Σ bits - 2·|groups| + 1))·x. 1 neuron.
  void select_groups(const std::vector<std::vector<Bit>>& groups, const Affine& x, const std::vector<Term>& outs);
  // Adds coef·(constant 1) to each output (the shared bias neuron).
  void constant(const std::vector<Term>& outs);
  // Adds coef·up (silu(K)·up: 1 neuron).
  void constant(const Affine& up, const std::vector<Term>& outs);
  // Multiplies by g every weight the neurons added so far put on one of `bits` (either
  // rail): the op's whole contribution to those bits, exactly, when g is a power of two.
  void scale_writes(const Word& bits, double g);
  sdk::Status commit(const std::string& name, int overwrites = -1);
  const MlpOp& op() const { return op_; }

 private:
  Circuit& circuit_;
  MlpOp op_;
};

// The conditions "the bits of w spell v" for a selector (MlpBuilder::select): w[i] where bit i
// of v is 1, !w[i] where it is 0.
std::vector<Bit> spells(const Word& w, unsigned v);

// [Σ terms ≥ t] into a new 1-bit field. 2 neurons.
sdk::Expected<Bit> threshold(Circuit& c, const std::string& owner, const std::string& name, std::vector<Term> terms,
                             double t);
// a ∧ b = silu(K(2a-1))·b / K. 1 neuron.
sdk::Expected<Bit> and2(Circuit& c, const std::string& owner, const std::string& name, Bit a, Bit b);
// a ∨ b = ¬(¬a ∧ ¬b): the AND written into a field read through its negative rail. 1 neuron.
sdk::Expected<Bit> or2(Circuit& c, const std::string& owner, const std::string& name, Bit a, Bit b);
// a ⊕ b = a∧¬b + ¬a∧b. 2 neurons. (NOT is free: operator! on a Bit.)
sdk::Expected<Bit> xor2(Circuit& c, const std::string& owner, const std::string& name, Bit a, Bit b);

enum class Logic { kAnd, kOr, kXor };
// Bitwise AND/OR (1 neuron per bit) or XOR (2 per bit) of two words.
sdk::Expected<Word> bitwise(Circuit& c, const std::string& owner, const std::string& name, Logic op, const Word& a,
                            const Word& b);
// A copy of x (1 neuron per bit: silu(K(2x-1))·1).
sdk::Expected<Word> copy(Circuit& c, const std::string& owner, const std::string& name, const Word& x);
// Value × bit: s ? x : 0 (1 neuron per bit).
sdk::Expected<Word> scale_by_bit(Circuit& c, const std::string& owner, const std::string& name, Bit s, const Word& x);
// s ? x1 : x0 (2 neurons per bit).
sdk::Expected<Word> mux2(Circuit& c, const std::string& owner, const std::string& name, Bit s, const Word& x1,
                         const Word& x0);
// Σ_k sel_k·inputs_k for a one-hot `sel` (0 if none is set). 1 neuron per input bit.
sdk::Expected<Word> mux_onehot(Circuit& c, const std::string& owner, const std::string& name,
                               const std::vector<Bit>& sel, const std::vector<Word>& inputs);
// inputs[sel] for a binary selector of n bits (0 if sel >= inputs.size()). 1 neuron per input bit.
sdk::Expected<Word> mux_binary(Circuit& c, const std::string& owner, const std::string& name, const Word& sel,
                               const std::vector<Word>& inputs);

struct AddResult {
  Word sum;
  Bit carry;  // carry out of the top bit
};
// a + b + cin (cin: c.zero(), c.one() or any bit) by carry-select over digit
// groups of `group` bits (<= 8: one MLP adds at most 8 bits exactly in bf16).
// MLP 1, per group m: local sums s0 = a_m + b_m, s1 = s0 + 1, bit i of each as
// [T ≥ 2^i] - [T ≥ 2^(i+1)] + [T ≥ 3·2^i] over T = Σ_{j≤i} 2^j(a_j + b_j);
// group 0's sum is final; generate G_m = [a_m+b_m ≥ 2^g], propagate P_m = [≥ 2^g-1].
// MLP 2: carry into group m C_m = [Σ_{l<m} 2^l(G_l+P_l) ≥ 2^m], folded into
// out_i = [2^(m+1)s0_i - E_m ≥ 2^m+1] + [2^(m+1)s1_i + E_m ≥ 3·2^m].
// Cost for 32 bits, g = 8: about 335 + 98 neurons after deduplication; 2 MLP layers.
sdk::Expected<AddResult> add(Circuit& c, const std::string& owner, const std::string& name, const Word& a,
                             const Word& b, Bit cin, int group = 8);
// a - b = a + ¬b + 1 (¬b is free in dual rail); carry = 1 iff a >= b unsigned.
sdk::Expected<AddResult> sub(Circuit& c, const std::string& owner, const std::string& name, const Word& a,
                             const Word& b, int group = 8);
// a == b: per 8-bit group d = Σ 2^j(a_j - b_j), e_m = [d ≥ 0] - [d ≥ 1] (3 neurons),
// then [Σ e_m ≥ groups] (2 neurons). 2 MLP layers (1 for <= 8 bits).
sdk::Expected<Bit> equal(Circuit& c, const std::string& owner, const std::string& name, const Word& a, const Word& b);
// a < b, unsigned or signed (signed = unsigned with both sign bits inverted, free):
// the carry out of a + ¬b + 1 is 0; group G/P in MLP 1 (4 neurons per group),
// [Σ 2^l(G_l+P_l) < 2^groups] in MLP 2 (2 neurons).
sdk::Expected<Bit> less_than(Circuit& c, const std::string& owner, const std::string& name, const Word& a,
                             const Word& b, bool is_signed);

enum class Shift { kLeft, kRightLogical, kRightArithmetic };
// x shifted by the unsigned amount in `amount` (a shift of width or more gives 0,
// or the sign for arithmetic shifts; amounts wrap at 2^amount.size()). One MLP
// per 3-bit digit of the amount: out_i = Σ_k [digit == k]·in_(i∓k·2^p), each term
// one selector neuron (1 neuron per (output bit, digit value)). 32 bits, 5-bit
// amount: 2 MLP layers, about 300 neurons.
sdk::Expected<Word> shift(Circuit& c, const std::string& owner, const std::string& name, const Word& x,
                          const Word& amount, Shift kind);

// A truth table in one MLP. The table is a list of disjoint cubes: inputs
// whose `care` bits equal `value` map to `out`; inputs in no cube map to 0.
// One selector neuron per cube with a nonzero output (silu(K(2·Σ match −
// 2·|care| + 1)), exactly K on its cube and exactly 0 elsewhere), so the cost
// is the number of such cubes: use don't-care bits to keep it small.
struct Cube {
  std::uint64_t value = 0;
  std::uint64_t care = 0;
  std::uint64_t out = 0;
};
sdk::Expected<Word> lookup(Circuit& c, const std::string& owner, const std::string& name, const Word& in,
                           int out_width, const std::vector<Cube>& cubes);
// The full table of f over all 2^|in| inputs (|in| <= 16); one neuron per input with f != 0.
sdk::Expected<Word> lookup(Circuit& c, const std::string& owner, const std::string& name, const Word& in,
                           int out_width, const std::function<std::uint64_t(std::uint64_t)>& f);

// Clears a whole field's slot to 0 (writes -x): 1 neuron per bit. Returns the
// field's new name; the old one may not be read afterwards.
sdk::Expected<Word> clear(Circuit& c, const std::string& name, const Word& field);
// Overwrites a whole field's slot with `value` (writes value - old): 2 neurons per bit.
// Under an enable guard this is a conditional register write.
sdk::Expected<Word> overwrite(Circuit& c, const std::string& name, const Word& field, const Word& value);

}  // namespace qgpu::weights
