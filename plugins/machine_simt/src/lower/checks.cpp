#include "lower/checks.h"

#include <algorithm>
#include <string>

namespace qgpu::simt::lower {

using sdk::ErrorCode;
using sdk::Opcode;
using sdk::ValueId;

sdk::Status check_launch(const sdk::KernelIR& kernel, const sdk::LaunchShape& shape, const MachineConfig& config,
                         const Diagnostics& diag) {
  if (shape.grid == 0 || shape.block == 0)
    return sdk::invalid_argument("kernel '" + kernel.name + "': launch of grid " + std::to_string(shape.grid) +
                                 " x block " + std::to_string(shape.block) + " has no threads");
  const std::uint64_t grid_yz = std::uint64_t{shape.grid_y} * shape.grid_z;
  const std::uint64_t block_yz = std::uint64_t{shape.block_y} * shape.block_z;
  if (grid_yz == 0 || block_yz == 0 || shape.grid % grid_yz != 0 || shape.block % block_yz != 0)
    return sdk::invalid_argument("kernel '" + kernel.name + "': launch of grid " + std::to_string(shape.grid) +
                                 " x block " + std::to_string(shape.block) +
                                 " does not factor into its y and z extents (grid y " + std::to_string(shape.grid_y) +
                                 ", z " + std::to_string(shape.grid_z) + "; block y " + std::to_string(shape.block_y) +
                                 ", z " + std::to_string(shape.block_z) + ")");
  if (shape.block > static_cast<std::uint32_t>(config.max_block_threads))
    return diag.error(ErrorCode::kLimitExceeded, {},
                      "thread block of " + std::to_string(shape.block) + " threads exceeds max_block_threads " +
                          std::to_string(config.max_block_threads) + " (over by " +
                          std::to_string(shape.block - config.max_block_threads) + ")");
  const std::uint64_t threads = static_cast<std::uint64_t>(shape.grid) * shape.block;
  if (threads > static_cast<std::uint64_t>(config.max_threads))
    return diag.error(ErrorCode::kLimitExceeded, {},
                      "launch of " + std::to_string(threads) + " threads (grid " + std::to_string(shape.grid) +
                          " x block " + std::to_string(shape.block) + ") exceeds max_threads " +
                          std::to_string(config.max_threads) + " (over by " +
                          std::to_string(threads - config.max_threads) + ")");
  return {};
}

sdk::Status check_structure(const sdk::KernelIR& kernel, const Diagnostics& diag) {
  const std::size_t values = kernel.value_types.size();
  if (kernel.blocks.empty()) return diag.error(ErrorCode::kInvalidArgument, kernel.loc, "has no blocks");
  if (!kernel.blocks[0].args.empty())
    return diag.error(ErrorCode::kInvalidArgument, kernel.loc, "entry block has arguments");
  for (std::size_t b = 0; b < kernel.blocks.size(); ++b) {
    const sdk::Block& block = kernel.blocks[b];
    if (block.instrs.empty() || !sdk::is_terminator(block.instrs.back().op))
      return diag.error(ErrorCode::kInvalidArgument, kernel.loc,
                        "block " + diag.label(b) + " does not end in a terminator");
    for (ValueId a : block.args)
      if (a == 0 || a >= values)
        return diag.error(ErrorCode::kInvalidArgument, kernel.loc, "block argument out of range");
    for (std::size_t i = 0; i < block.instrs.size(); ++i) {
      const sdk::Instr& in = block.instrs[i];
      if (sdk::is_terminator(in.op) && i + 1 != block.instrs.size())
        return diag.error(in, ErrorCode::kInvalidArgument, "terminator in the middle of block " + diag.label(b));
      for (ValueId v : in.operands)
        if (v == 0 || v >= values)
          return diag.error(in, ErrorCode::kInvalidArgument,
                            op_str(in.op) + " uses value %" + std::to_string(v) + " outside the value table");
      if (in.result != 0 && in.result >= values)
        return diag.error(in, ErrorCode::kInvalidArgument, "result %" + std::to_string(in.result) + " out of range");
      for (const sdk::BranchTarget& t : in.targets) {
        if (t.block >= kernel.blocks.size())
          return diag.error(
              in, ErrorCode::kInvalidArgument,
              "branch to block " + std::to_string(t.block) + " of " + std::to_string(kernel.blocks.size()));
        if (t.args.size() != kernel.blocks[t.block].args.size())
          return diag.error(in, ErrorCode::kInvalidArgument,
                            "branch to " + diag.label(t.block) + " passes " + std::to_string(t.args.size()) +
                                " arguments, the block takes " + std::to_string(kernel.blocks[t.block].args.size()));
        for (ValueId v : t.args)
          if (v == 0 || v >= values) return diag.error(in, ErrorCode::kInvalidArgument, "branch argument out of range");
      }
      const std::size_t want = in.op == Opcode::kBr ? 1 : in.op == Opcode::kCondBr ? 2 : 0;
      if (in.targets.size() != want)
        return diag.error(
            in, ErrorCode::kInvalidArgument,
            op_str(in.op) + " has " + std::to_string(in.targets.size()) + " targets, expected " + std::to_string(want));
    }
  }
  return {};
}

sdk::Expected<SharedLayout> layout_shared(const sdk::KernelIR& kernel, const MachineConfig& config,
                                          const Diagnostics& diag) {
  SharedLayout layout;
  std::uint64_t offset = 0;
  for (const sdk::SharedVar& v : kernel.shared) {
    const std::uint64_t align = std::max<std::uint64_t>(4, v.align);
    offset = (offset + align - 1) / align * align;
    layout.offsets.push_back(offset);
    offset += v.bytes;
  }
  layout.words = static_cast<int>((offset + 3) / 4);
  if (layout.words > config.shared_words)
    return diag.limit("shared memory", layout.words, config.shared_words, "words per thread block");
  return layout;
}

}  // namespace qgpu::simt::lower
