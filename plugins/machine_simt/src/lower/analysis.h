// Facts about the KernelIR that instruction selection reads: each value's definition and uses,
// which memory a pointer points to, and which i64 values need their high word.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "lower/block_order.h"
#include "qgpu/sdk/kernel_ir.h"

namespace qgpu::simt::lower {

// Where a pointer value points: the meet of what it is computed from.
enum class Origin : std::uint8_t { kUnknown, kGlobal, kShared, kMixed };

struct Use {
  const sdk::Instr* user;
  int index;  // operand index, or -1 for a branch argument
};

struct Analysis {
  const sdk::KernelIR* kernel = nullptr;
  std::vector<const sdk::Instr*> definition;          // by value; null for block arguments
  std::vector<std::vector<Use>> uses;                 // by value; in reachable blocks only
  std::map<const sdk::Instr*, std::size_t> block_of;  // every instruction's block
  std::vector<Origin> origin;                         // by value
  std::vector<bool> wide;                             // by value: an i64 whose high word is needed

  sdk::IrType type(sdk::ValueId v) const {
    return v < kernel->value_types.size() ? kernel->value_types[v] : sdk::IrType::kVoid;
  }
  bool unused(sdk::ValueId v) const { return uses[v].empty(); }
  // A zext/sext/trunc that keeps the value's word as it is (between i32 and i64, or i1 to i32+).
  bool is_alias(const sdk::Instr& in) const;
  // v is a constant at launch: a const, a param or a shared address (through aliases).
  bool is_launch_constant(sdk::ValueId v) const;
  // Whether every use of v is (through renames and constant offsets) a memory address.
  bool only_addresses(sdk::ValueId v, int depth = 0) const;
  // A mul whose one use is a (non-i1) add of a non-constant in the same block: it becomes a mad.
  bool mad_candidate(const sdk::Instr& in) const;
};

Analysis analyse(const sdk::KernelIR& kernel, const BlockOrder& order);

}  // namespace qgpu::simt::lower
