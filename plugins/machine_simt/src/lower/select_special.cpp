// Instruction selection for CUDA's special registers. The machine numbers threads and thread
// blocks linearly (%tid, %ctaid); the x, y and z indices of a 2-D or 3-D launch are derived from
// them with the launch's extents, which are constants of the lowered program (x fastest, as CUDA
// numbers them).
#include <bit>
#include <cstdint>
#include <optional>
#include <string>

#include "lower/select.h"

namespace qgpu::simt::lower {
namespace {

// A multiplier and shift with floor(n * multiplier / 2^shift) == floor(n / divisor) for every n
// below `bound`, n * multiplier never leaving 32 bits: checked for every such n. Nothing when no
// shift up to 31 works.
struct Reciprocal {
  std::uint32_t multiplier = 0;
  int shift = 0;
};

std::optional<Reciprocal> reciprocal(std::uint32_t divisor, std::uint32_t bound) {
  for (int shift = 0; shift < 32; ++shift) {
    const std::uint64_t multiplier = ((std::uint64_t{1} << shift) + divisor - 1) / divisor;
    if (multiplier * (bound - 1) > 0xffffffffu) return std::nullopt;
    bool exact = true;
    for (std::uint64_t n = 0; n < bound && exact; ++n) exact = (n * multiplier) >> shift == n / divisor;
    if (exact) return Reciprocal{static_cast<std::uint32_t>(multiplier), shift};
  }
  return std::nullopt;
}

}  // namespace

using sdk::ErrorCode;
using sdk::Status;
using Form = LoweredValue::Form;

// floor(index / divisor) for an index below `bound`: a shift for a power of two, else a multiply
// by the reciprocal and a shift (checked exact over every index below the bound).
sdk::Expected<Operand> Selector::divide_index(const sdk::Instr& in, Operand index, std::uint32_t divisor,
                                              std::uint32_t bound) {
  if (divisor == 1) return index;
  if (std::has_single_bit(divisor))
    return builder_.compute(Op::kShr, index, imm(static_cast<std::uint32_t>(std::countr_zero(divisor))));
  const auto r = reciprocal(divisor, bound);
  if (!r)
    return diag_.error(
        in, ErrorCode::kInternal,
        "no exact reciprocal of " + std::to_string(divisor) + " for indices below " + std::to_string(bound));
  const Operand product = builder_.compute(Op::kMul, index, imm(r->multiplier));
  return builder_.compute(Op::kShr, product, imm(static_cast<std::uint32_t>(r->shift)));
}

// Component `axis` (0: x, 1: y, 2: z) of a linear index below x * y * z over the extents (x, y, z).
sdk::Expected<Operand> Selector::index_component(const sdk::Instr& in, Special linear, int axis, std::uint32_t x,
                                                 std::uint32_t y, std::uint32_t z) {
  const Operand index = Operand::special_reg(linear);
  const std::uint32_t total = x * y * z;
  if (axis == 2) return divide_index(in, index, x * y, total);
  if (axis == 0 && std::has_single_bit(x)) return builder_.compute(Op::kAnd, index, imm(x - 1));
  // above = index / x (the y and z part), then the remainder of the wanted axis.
  QGPU_ASSIGN_OR_RETURN(const Operand above, divide_index(in, index, x, total));
  if (axis == 0) return builder_.compute(Op::kSub, index, builder_.compute(Op::kMul, above, imm(x)));
  if (z == 1) return above;
  QGPU_ASSIGN_OR_RETURN(const Operand layer, divide_index(in, above, y, y * z));
  const Operand whole = builder_.compute(Op::kMul, layer, imm(y));
  return builder_.compute(Op::kSub, above, whole);
}

Status Selector::select_special(const sdk::Instr& in) {
  using SR = sdk::SpecialReg;
  const std::uint32_t bx = shape_.block_x(), by = shape_.block_y, bz = shape_.block_z;
  const std::uint32_t gx = shape_.grid_x(), gy = shape_.grid_y, gz = shape_.grid_z;
  const bool block_1d = by == 1 && bz == 1, grid_1d = gy == 1 && gz == 1;
  auto special = [&](Special s) {
    LoweredValue v;
    v.form = Form::kSpecial;
    v.special = s;
    define(in, v);
    return Status{};
  };
  auto constant = [&](std::uint32_t value) {
    define(in, LoweredValue::constant(value));
    return Status{};
  };
  auto component = [&](Special linear, int axis, std::uint32_t x, std::uint32_t y, std::uint32_t z) -> Status {
    QGPU_ASSIGN_OR_RETURN(const Operand value, index_component(in, linear, axis, x, y, z));
    define(in, LoweredValue::of(value));
    return {};
  };
  switch (in.special) {
    case SR::kTidX: return block_1d ? special(Special::kTid) : component(Special::kTid, 0, bx, by, bz);
    case SR::kTidY: return by == 1 ? constant(0) : component(Special::kTid, 1, bx, by, bz);
    case SR::kTidZ: return bz == 1 ? constant(0) : component(Special::kTid, 2, bx, by, bz);
    case SR::kNtidX: return block_1d ? special(Special::kNtid) : constant(bx);
    case SR::kNtidY: return constant(by);
    case SR::kNtidZ: return constant(bz);
    case SR::kCtaidX: return grid_1d ? special(Special::kCtaid) : component(Special::kCtaid, 0, gx, gy, gz);
    case SR::kCtaidY: return gy == 1 ? constant(0) : component(Special::kCtaid, 1, gx, gy, gz);
    case SR::kCtaidZ: return gz == 1 ? constant(0) : component(Special::kCtaid, 2, gx, gy, gz);
    case SR::kNctaidX: return grid_1d ? special(Special::kNctaid) : constant(gx);
    case SR::kNctaidY: return constant(gy);
    case SR::kNctaidZ: return constant(gz);
    // CUDA's lane: the linear thread index modulo 32, whatever the block's shape.
    case SR::kLaneId: return special(Special::kLaneId);
    // CUDA's value; width-dependent code is checked at shfl/vote.
    case SR::kWarpSize: return constant(32);
  }
  return diag_.error(in, ErrorCode::kInternal, "unknown special register");
}

}  // namespace qgpu::simt::lower
