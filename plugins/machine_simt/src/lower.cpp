// The lowering pipeline, one pass per file under lower/ (docs/ISA.md "Lowering").
#include "lower.h"

#include "lower/analysis.h"
#include "lower/block_order.h"
#include "lower/checks.h"
#include "lower/diagnostics.h"
#include "lower/emit.h"
#include "lower/register_allocation.h"
#include "lower/select.h"

namespace qgpu::simt {

sdk::Expected<std::unique_ptr<Program>> lower_kernel(const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                                     const MachineConfig& config) {
  const lower::Diagnostics diag(kernel);
  QGPU_RETURN_IF_ERROR(lower::check_launch(kernel, shape, config, diag));
  QGPU_RETURN_IF_ERROR(lower::check_structure(kernel, diag));
  QGPU_ASSIGN_OR_RETURN(const lower::SharedLayout shared, lower::layout_shared(kernel, config, diag));
  const lower::BlockOrder order = lower::order_blocks(kernel);
  const lower::Analysis analysis = lower::analyse(kernel, order);
  QGPU_ASSIGN_OR_RETURN(lower::Function function,
                        lower::select_instructions(kernel, shape, config, order, analysis, shared, diag));
  const int shared_words = shared.words + function.scratch_words;
  QGPU_ASSIGN_OR_RETURN(const lower::Registers registers,
                        lower::allocate_registers(function, config, kernel, shape, shared_words, diag));
  return lower::emit_program(function, registers, kernel, shape, config,
                             shared_words + registers.spilled * static_cast<int>(shape.block), diag);
}

}  // namespace qgpu::simt
