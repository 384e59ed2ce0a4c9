// Machine: KernelIR -> a program for the machine, its limits, and the
// reference interpreter that defines its semantics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qgpu/sdk/frontend.h"
#include "qgpu/sdk/plugin.h"

namespace qgpu::sdk {

// A 1-D launch: `grid` thread blocks of `block` threads.
struct LaunchShape {
  std::uint32_t grid = 1;
  std::uint32_t block = 1;
};

// A lowered kernel. Its representation belongs to the machine plugin; the
// host only prints it (--dump-program) and hands it back to the same plugin.
class QGPU_SDK_API MachineProgram {
 public:
  virtual ~MachineProgram();
  virtual std::string dump() const = 0;
};

// One launch argument: an int32 scalar or an int32 array (global memory).
struct LaunchArg {
  std::string param;  // the kernel parameter it binds to
  bool is_array = false;
  std::int32_t scalar = 0;
  std::vector<std::int32_t> array;
};

struct LaunchResult {
  std::vector<LaunchArg> arrays;  // final contents of every array argument, in parameter order
  std::vector<std::pair<std::string, std::int64_t>> stats;  // e.g. {"warp_instructions", 12}
  std::vector<std::string> trace;  // one line per executed block (warp, block, active lanes) when asked for
  // With InterpretOptions::records, the machine's token protocol for this launch: the records the host
  // feeds and those the model must generate, one readable line each (with its token count).
  std::vector<std::string> prompt_records;
  std::vector<std::string> generated_records;
};

struct InterpretOptions {
  bool trace = false;
  bool records = false;  // also encode the launch in the machine's token protocol (prompt + expected stream)
  std::uint64_t max_steps = 10'000'000;  // block executions before the run is stopped with an error
};

class QGPU_SDK_API Machine : public Plugin {
 public:
  using Interface = Machine;
  static constexpr QgpuPluginKind kKind = QGPU_PLUGIN_MACHINE;

  ~Machine() override;
  // Lowers a kernel for one launch shape; errors name the limit exceeded and by how much.
  virtual Expected<std::unique_ptr<MachineProgram>> lower(const KernelIR& kernel, const LaunchShape& shape) = 0;
  // Runs a lowered program on the reference interpreter (the semantic oracle).
  virtual Expected<LaunchResult> interpret(const MachineProgram& program, const std::vector<LaunchArg>& args,
                                          const InterpretOptions& options) = 0;
};

}  // namespace qgpu::sdk
