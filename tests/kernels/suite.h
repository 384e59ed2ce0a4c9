// The CUDA kernel suite: one table of launches of tests/kernels/cu/*.cu, each paired with an
// independent plain C++ reference of its final memory (or the error the launch must fail with).
// The table depends on the standard library only so that the GPU golden runner
// (bench/gpu_golden) compiles the very same table with nvcc.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace qgpu::kernels {

using Words = std::vector<std::int32_t>;

// One kernel argument, in the kernel's parameter order.
struct Arg {
  std::string name;  // the CUDA parameter name
  bool is_array = false;
  Words values;     // an array's initial contents, or the scalar as values[0]
  std::string cli;  // how the value is spelled on the command line (decimal list, 0x.., zeros(N))
};

// A launch as a reference sees it: the shape, and the arguments whose arrays it updates in place.
// grid and block are the x extents; a 2-D launch (`--grid X,Y --block X,Y`) also sets the y ones.
struct Launch {
  int grid = 1;
  int block = 1;
  std::vector<Arg> args;
  int grid_y = 1;
  int block_y = 1;

  int blocks() const { return grid * grid_y; }
  int block_threads() const { return block * block_y; }
  int threads() const { return blocks() * block_threads(); }
  bool two_dimensional() const { return grid_y != 1 || block_y != 1; }
  // Throw std::out_of_range on an unknown name so a broken table fails loudly.
  Words& array(std::string_view name);
  std::int32_t scalar(std::string_view name) const;
};

using Reference = std::function<void(Launch&)>;

struct Case {
  std::string name;         // ctest name: kernels.<name>
  std::string file;         // relative to tests/kernels/cu/
  std::string kernel;       // entry point (passed with --kernel)
  bool pass_kernel = true;  // false: leave --kernel off the command line
  bool named_args = false;  // spell arguments NAME=VALUE (else positional, in parameter order)
  Launch launch;
  Reference reference;       // computes the expected final arrays; empty for rejection cases
  std::string expect_error;  // rejection cases: ECMAScript regex (case-insensitive) for the error
  // Non-empty: the case is about CUDA source itself, so it has no kernels_nvcc.* twin (its test
  // there is skipped with this reason). Everything else also runs from ptx-nvcc/<file>.ptx.
  std::string clang_only;
  // Sized for the circuit's full sizes (configs/simt_qwen2b.yaml: 512 words of global and of shared
  // memory, 128 ROM blocks, 4,096 threads) rather than the plugin's defaults the rest of the suite
  // runs with (tests/configs/simt_small.yaml): its kernels.* and kernels_nvcc.* run with that config.
  bool full_size = false;

  bool rejected() const { return !expect_error.empty(); }
  // Arguments after `qgpu-host --config CFG run FILE` (launch shape, arguments, engine, --json).
  // With ptx_names, named arguments are spelled param<i>=VALUE: PTX carries no CUDA names.
  std::vector<std::string> cli_args(bool ptx_names = false) const;
  // The name PTX from nvcc gives an argument ("param<i>", i its position); throws
  // std::out_of_range on an unknown name.
  std::string ptx_param_name(std::string_view cuda_name) const;
  // Initial launch with the reference applied: the expected final arrays, by name.
  std::vector<std::pair<std::string, Words>> expected() const;
};

// The machine's launch limits the accepted cases must respect (ARCHITECTURE.md §3): the plugin's
// default sizes (tests/configs/simt_small.yaml), and for full_size cases the circuit's full sizes
// (configs/simt_qwen2b.yaml: 128 thread blocks of 32 threads, 512 words).
inline constexpr int kMaxBlock = 32;
inline constexpr int kMaxThreads = 128;
inline constexpr int kMaxArrayWords = 126;
inline constexpr int kFullMaxThreads = 4096;
inline constexpr int kFullMaxArrayWords = 512;

const std::vector<Case>& all_cases();

// Checks a case against the table's own rules (limits, names, non-empty arrays); returns the
// problems found, one line each.
std::vector<std::string> validate(const Case& c);

// A hash (FNV-1a, hex) of everything that determines a case's result: the kernel's source text,
// entry, launch shape and arguments. Golden files store it so a stale entry is never compared.
std::string fingerprint(const Case& c, const std::string& source_text);

// The table as JSON (cases with launches and expected arrays), for tools such as the golden runner.
// With `source`, each case also carries its fingerprint (source maps a case to its kernel's text).
std::string cases_json(const std::function<std::string(const Case&)>& source = nullptr);

}  // namespace qgpu::kernels
