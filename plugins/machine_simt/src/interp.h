// The reference interpreter: the semantic oracle of the SIMT machine
// (docs/ISA.md "Execution"). It runs the encoded, linked ROM image, so the
// encoding is exercised on every run.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "program.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt {

// Where a launch's arrays live: consecutively from word 0 in parameter order.
struct MemoryLayout {
  std::vector<std::uint32_t> param_values;  // per parameter: the scalar, or the array's base byte address
  std::vector<int> base_word;               // per parameter: first word of the array, -1 for scalars
  std::vector<int> words;                   // per parameter: the array's words, 0 for scalars
  int total_words = 0;                      // the words holding the arrays (and their red zones)
  int red_zone = 0;                         // unused words before, between and after the arrays
};
// Arrays laid out from word 0 in parameter order, adjacent, or (red_zone > 0, InterpretOptions::
// memcheck) with red_zone unused words before each array and after the last.
sdk::Expected<MemoryLayout> layout_arguments(const Program& program, const std::vector<sdk::LaunchArg>& args,
                                             int red_zone = 0);
// Memcheck's red zones: words between arrays, 32 (128 bytes) each.
inline constexpr int kRedZoneWords = 32;

// Lane state as the scheduler sees it (docs/ISA.md section 5).
enum class LaneRun : std::uint8_t { kAbsent, kRunning, kBarrier, kExited };

// One block execution, reported after it ran (the token protocol builds its
// record stream from these; docs/PROTOCOL.md).
struct BlockEvent {
  std::uint32_t cta = 0;
  int warp = 0;  // within the thread block
  std::uint32_t block = 0;
  unsigned mask = 0;
  std::array<const std::array<std::uint32_t, 16>*, 4> regs{};  // each lane's registers after the block
  std::array<LaneRun, 4> run{};                                // each lane's state after the block
  std::array<std::uint32_t, 4> pending{};                      // each lane's pending block after the block
  std::vector<std::pair<bool, std::uint32_t>> written;         // (shared, word) of every store/atomic, in order
  const std::vector<std::uint32_t>* global = nullptr;          // memory after the block
  const std::vector<std::uint32_t>* shared = nullptr;
};

// A memory access that faulted (docs/ISA.md §5): its byte address is not a multiple of 4
// (misaligned) or, aligned, not below its space's bound (out of bounds): the words holding the
// launch's arrays (global) or the shared words the kernel declares.
enum class FaultKind : std::uint8_t { kMisaligned = 0, kOutOfBounds = 1 };
struct MemoryFault {
  std::uint32_t cta = 0;
  int warp = 0;  // within the thread block
  int lane = 0;
  std::uint32_t block = 0;
  int slot = 0;
  unsigned mask = 0;          // the block execution's lanes
  std::uint32_t address = 0;  // the byte address
  bool shared = false;
  FaultKind kind = FaultKind::kMisaligned;
};
// The one-line error every engine reports for `fault` (no memcheck red zones): `instr` is the
// faulting instruction as the linked ROM holds it, `global_words` the words holding the launch's
// arrays (MemoryLayout::total_words).
sdk::Status memory_fault_error(const Program& program, const MemoryFault& fault, const Instr& instr, int global_words);

// Receives a launch's events in execution order; an error stops the run.
class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  virtual sdk::Status on_cta_start(std::uint32_t cta) = 0;
  virtual sdk::Status on_block(const BlockEvent& event) = 0;
  virtual sdk::Status on_barrier_release(std::uint32_t cta) = 0;
  virtual sdk::Status on_finish() = 0;
  // A memory fault ends the run with its error (memory_fault_error) after this; red-zone
  // faults of memcheck are not reported here.
  virtual void on_fault(const MemoryFault&) {}
};

sdk::Expected<sdk::LaunchResult> interpret_program(const Program& program, const std::vector<sdk::LaunchArg>& args,
                                                   const sdk::InterpretOptions& options,
                                                   LaunchObserver* observer = nullptr);

}  // namespace qgpu::simt
