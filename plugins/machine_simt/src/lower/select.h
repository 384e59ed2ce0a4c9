// Instruction selection: KernelIR (SSA, block arguments) -> the lowering's IR (ir.h) over virtual
// registers. Each KernelIR value becomes a LoweredValue: a register, or something cheaper that
// is only materialised where it is used (a launch constant, a special register, a register plus
// a constant that folds into memory offsets, a multiply that may fold into an add as mad).
// Block arguments are left SSA through parallel copies on the edges into their blocks (out-of-SSA).
//
// The Selector is split by instruction family over select.cpp (dispatch, values, arithmetic),
// select_wide.cpp (i64 values with a high word), select_memory.cpp (loads, stores, atomics,
// shuffles, votes), select_subword.cpp (8-, 16- and 64-bit loads and stores) and select_branches.cpp
// (terminators and the edge copies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "config.h"
#include "lower/analysis.h"
#include "lower/block_order.h"
#include "lower/builder.h"
#include "lower/checks.h"
#include "lower/diagnostics.h"
#include "lower/ir.h"
#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt::lower {

// "0x1f": a 32-bit value in hexadecimal, for messages.
inline std::string hex(std::uint32_t v) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), kDigits[v & 15]);
    v >>= 4;
  } while (v);
  return "0x" + s;
}

sdk::Expected<Function> select_instructions(const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                            const MachineConfig& config, const BlockOrder& order,
                                            const Analysis& analysis, const SharedLayout& shared,
                                            const Diagnostics& diag);

// What a KernelIR value is during instruction selection.
struct LoweredValue {
  enum class Form : std::uint8_t { kNone, kReg, kConst, kSpecial, kRegOffset, kPendingMul };
  Form form = Form::kNone;
  int vreg = -1;          // kReg, kRegOffset
  std::uint32_t imm = 0;  // kConst: the value; kRegOffset: the offset
  int reloc = -1;         // kConst, kRegOffset: >= 0 adds a launch constant
  Special special = Special::kTid;
  Operand factor_a, factor_b;  // kPendingMul

  static LoweredValue in_register(int vreg) {
    LoweredValue v;
    v.form = Form::kReg;
    v.vreg = vreg;
    return v;
  }
  static LoweredValue constant(std::uint32_t value, int reloc = -1) {
    LoweredValue v;
    v.form = Form::kConst;
    v.imm = value;
    v.reloc = reloc;
    return v;
  }
  static LoweredValue of(Operand m);
};

class Selector {
 public:
  Selector(const sdk::KernelIR& kernel, const sdk::LaunchShape& shape, const MachineConfig& config,
           const BlockOrder& order, const Analysis& analysis, const SharedLayout& shared, const Diagnostics& diag)
      : kernel_(kernel),
        shape_(shape),
        config_(config),
        order_(order),
        analysis_(analysis),
        shared_(shared),
        diag_(diag),
        builder_(function_) {}

  sdk::Expected<Function> run();

 private:
  using Status = sdk::Status;

  // select.cpp: dispatch, values and operand checks, arithmetic.
  Status select(const sdk::Instr& in);
  Status select_constant(const sdk::Instr& in);  // const, param, shared address
  Status select_special(const sdk::Instr& in);
  sdk::Expected<Operand> divide_index(const sdk::Instr& in, Operand index, std::uint32_t divisor, std::uint32_t bound);
  sdk::Expected<Operand> index_component(const sdk::Instr& in, Special linear, int axis, std::uint32_t x,
                                         std::uint32_t y, std::uint32_t z);
  Status select_add_sub(const sdk::Instr& in);
  Status select_mul(const sdk::Instr& in);
  Status select_binary(const sdk::Instr& in);  // and/or/xor, shifts, min/max
  Status select_unary(const sdk::Instr& in);   // not, neg, abs
  Status select_mulhi_div_rem(const sdk::Instr& in);
  Status select_bit_count(const sdk::Instr& in);  // popc, clz, brev
  Status select_compare(const sdk::Instr& in);
  Status select_select(const sdk::Instr& in);
  Status select_cast(const sdk::Instr& in);  // zext, sext, trunc

  // select_wide.cpp
  Status select_wide(const sdk::Instr& in);
  Status select_wide_compare(const sdk::Instr& in, Op op);
  sdk::Expected<Operand> high_word(const sdk::Instr& in, sdk::ValueId v) const;

  // select_memory.cpp
  Status select_memory(const sdk::Instr& in);
  Status select_shuffle(const sdk::Instr& in);
  Status select_vote(const sdk::Instr& in);

  // select_warp.cpp: collectives of a 32-thread CUDA warp across machine warps, through block
  // barriers and a shared-memory scratch region after the kernel's __shared__ variables.
  Status select_shuffle_across(const sdk::Instr& in, const sdk::Instr& sh, const std::string& name,
                               std::uint32_t width);
  Status select_vote_across(const sdk::Instr& in, const std::string& name);
  Status check_cuda_warp(const sdk::Instr& in, const std::string& name, sdk::ValueId member_mask);
  std::uint32_t cuda_warp_mask() const;  // the block's threads as a CUDA member mask
  // The in-range predicate of a shuffle (and, with `source`, the source lane).
  Operand shuffle_in_range(sdk::ShflMode mode, Operand b, std::uint32_t width, Operand* source);
  void block_barrier(const char* suffix);
  int warp_slots_base();
  void append_vote_word_access(Instruction mi);
  // Places the vote word, sizes the scratch and checks it against shared_words.
  Status finish_warp_scratch();
  // select_subword.cpp: 8- and 16-bit loads and stores on the containing word; 64-bit ones as
  // two words.
  Status select_subword(const sdk::Instr& in, bool shared);
  Status select_doubleword(const sdk::Instr& in, bool shared);

  // select_branches.cpp
  Status select_barrier(const sdk::Instr& in);
  Status select_branch(const sdk::Instr& in);
  Status select_cond_branch(const sdk::Instr& in);
  bool has_live_args(const sdk::BranchTarget& t) const;
  // The parallel copy into t's block arguments, appended to `block`.
  Status copies_into(const sdk::Instr& in, const sdk::BranchTarget& t, int block);

  // Values.
  sdk::Expected<LoweredValue*> lookup(const sdk::Instr& in, sdk::ValueId v);
  // lookup(), then resolve().
  sdk::Expected<Operand> resolved(const sdk::Instr& in, sdk::ValueId v);
  // The value as an operand, materialising a register offset or a pending multiply.
  Operand resolve(LoweredValue& v);
  void define(const sdk::Instr& in, LoweredValue v) {
    if (in.result != 0) values_[in.result] = v;
  }
  // A pure instruction whose result nothing reads: it is not selected.
  bool result_unused(const sdk::Instr& in) const { return in.result != 0 && analysis_.unused(in.result); }

  // Operand checks.
  Status need(const sdk::Instr& in, std::size_t n) const;
  Status need_word(const sdk::Instr& in, sdk::IrType t, bool i64_ok, bool i1_ok = false, bool narrow_ok = false) const;

  const sdk::KernelIR& kernel_;
  const sdk::LaunchShape& shape_;
  const MachineConfig& config_;
  const BlockOrder& order_;
  const Analysis& analysis_;
  const SharedLayout& shared_;
  const Diagnostics& diag_;
  Function function_;
  Builder builder_;
  std::vector<LoweredValue> values_;            // by KernelIR value
  std::vector<Operand> high_;                   // by KernelIR value: the high words of wide values
  std::set<sdk::ValueId> dead_args_;            // block arguments nothing reads: no copies
  std::vector<std::vector<int>> chains_;        // by KernelIR block: the machine blocks it becomes
  std::vector<std::vector<int>> edges_before_;  // by KernelIR block: edge-copy blocks placed before it
  std::size_t current_ir_ = 0;                  // the KernelIR block being selected

  // select_warp.cpp's scratch: whether shuffles use the per-thread slots and votes the vote word;
  // the (block, index) of every access to the vote word, placed once the slots are known; the
  // KernelIR blocks only some threads may reach (divergence.h), computed at the first collective.
  bool uses_warp_slots_ = false, uses_warp_word_ = false;
  std::vector<std::pair<int, std::size_t>> vote_word_refs_;
  std::vector<bool> divergent_;
  // select_subword.cpp: the word address and shift of a sub-word address already computed in this
  // KernelIR block (a load and a store of one `char` share them), by (block, address, alignment mask).
  struct SubwordAddress {
    Operand word, shift;
    std::uint32_t offset = 0;
    int reloc = -1;
  };
  std::map<std::tuple<std::size_t, sdk::ValueId, std::uint32_t>, SubwordAddress> subword_addresses_;
};

}  // namespace qgpu::simt::lower
