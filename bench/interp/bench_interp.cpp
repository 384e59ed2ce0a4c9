// Interpreter speed on a loop-heavy kernel: warp-instructions per second.
//
//   qgpu_bench_interp [trip_count] [repeats] [config]
//
// Kernel (as clang -O2 shapes it, built directly as KernelIR):
//   s = 0; for (j = 0; j < count; ++j) s += (j * tid) ^ (s >> 3); out[gid] = s;
// launched as 3 blocks of 32 threads (96 output words fit the default 126), on the machine plugin
// the config selects (default configs/simt_qwen2b.yaml), loaded as qgpu-host loads it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "qgpu/core/host.h"
#include "qgpu/sdk/sdk.h"

using namespace qgpu;
using sdk::IrType;
using sdk::Opcode;

namespace {

struct Builder {
  sdk::KernelIR k;
  int cur = 0;
  std::uint32_t value(IrType t) {
    k.value_types.push_back(t);
    return static_cast<std::uint32_t>(k.value_types.size() - 1);
  }
  std::uint32_t emit(Opcode op, IrType t, std::vector<std::uint32_t> ops, std::int64_t imm = 0) {
    sdk::Instr in;
    in.op = op;
    in.type = t;
    in.operands = std::move(ops);
    in.imm = imm;
    if (t != IrType::kVoid && op != Opcode::kStore) in.result = value(t);
    k.blocks[cur].instrs.push_back(in);
    return in.result;
  }
  std::uint32_t special(sdk::SpecialReg r) {
    const std::uint32_t v = emit(Opcode::kSpecial, IrType::kI32, {});
    k.blocks[cur].instrs.back().special = r;
    return v;
  }
};

sdk::KernelIR loop_kernel() {
  Builder b;
  b.k.name = "bench_loop";
  b.k.value_types.push_back(IrType::kVoid);
  b.k.params = {{"out", sdk::KernelParam::Kind::kPointer, IrType::kI64},
                {"count", sdk::KernelParam::Kind::kScalar, IrType::kI32}};
  b.k.blocks.resize(3);
  b.k.blocks[1].args = {b.value(IrType::kI32), b.value(IrType::kI32)};
  b.k.blocks[2].args = {b.value(IrType::kI32)};
  const auto j = b.k.blocks[1].args[0], s = b.k.blocks[1].args[1];
  // entry
  const auto out = b.emit(Opcode::kParam, IrType::kI64, {}, 0), count = b.emit(Opcode::kParam, IrType::kI32, {}, 1);
  const auto tid = b.special(sdk::SpecialReg::kTidX);
  const auto gid = b.emit(
      Opcode::kAdd, IrType::kI32,
      {b.emit(Opcode::kMul, IrType::kI32, {b.special(sdk::SpecialReg::kCtaidX), b.special(sdk::SpecialReg::kNtidX)}),
       tid});
  const auto zero = b.emit(Opcode::kConst, IrType::kI32, {}, 0);
  const auto any = b.emit(Opcode::kICmp, IrType::kI1, {count, zero});
  b.k.blocks[0].instrs.back().pred = sdk::CmpPred::kSgt;
  sdk::Instr cbr;
  cbr.op = Opcode::kCondBr;
  cbr.operands = {any};
  cbr.targets = {{1, {zero, zero}}, {2, {zero}}};
  b.k.blocks[0].instrs.push_back(cbr);
  // loop(j, s)
  b.cur = 1;
  const auto t = b.emit(Opcode::kXor, IrType::kI32,
                        {b.emit(Opcode::kMul, IrType::kI32, {j, tid}),
                         b.emit(Opcode::kAShr, IrType::kI32, {s, b.emit(Opcode::kConst, IrType::kI32, {}, 3)})});
  const auto s2 = b.emit(Opcode::kAdd, IrType::kI32, {s, t});
  const auto j2 = b.emit(Opcode::kAdd, IrType::kI32, {j, b.emit(Opcode::kConst, IrType::kI32, {}, 1)});
  const auto more = b.emit(Opcode::kICmp, IrType::kI1, {j2, count});
  b.k.blocks[1].instrs.back().pred = sdk::CmpPred::kSlt;
  cbr.operands = {more};
  cbr.targets = {{1, {j2, s2}}, {2, {s2}}};
  b.k.blocks[1].instrs.push_back(cbr);
  // exit(r)
  b.cur = 2;
  const auto off = b.emit(Opcode::kMul, IrType::kI64,
                          {b.emit(Opcode::kSExt, IrType::kI64, {gid}), b.emit(Opcode::kConst, IrType::kI64, {}, 4)});
  b.emit(Opcode::kStore, IrType::kI32, {b.emit(Opcode::kAdd, IrType::kI64, {out, off}), b.k.blocks[2].args[0]});
  sdk::Instr ret;
  ret.op = Opcode::kRet;
  b.k.blocks[2].instrs.push_back(ret);
  return b.k;
}

}  // namespace

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  core::HostOptions host_options;
  host_options.config_file = argc > 3 ? argv[3] : QGPU_CONFIG;
  std::error_code ec;
  host_options.executable = std::filesystem::read_symlink("/proc/self/exe", ec);
  auto host = core::Host::open(host_options);
  if (!host) {
    std::fprintf(stderr, "qgpu_bench_interp: %s\n", host.error().to_string().c_str());
    return 1;
  }
  auto machine = (*host)->instantiate<sdk::Machine>();
  if (!machine) {
    std::fprintf(stderr, "qgpu_bench_interp: %s\n", machine.error().to_string().c_str());
    return 1;
  }
  auto program = (*machine)->lower(loop_kernel(), {3, 32});
  if (!program) {
    std::fprintf(stderr, "qgpu_bench_interp: %s\n", program.status().to_string().c_str());
    return 1;
  }
  std::vector<sdk::LaunchArg> args(2);
  args[0].param = "out";
  args[0].is_array = true;
  args[0].array.assign(96, 0);
  args[1].param = "count";
  args[1].scalar = count;
  sdk::InterpretOptions options;
  options.max_steps = UINT64_MAX;
  double best = 1e30;
  std::int64_t warp_instructions = 0, blocks = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    auto result = (*machine)->interpret(**program, args, options);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result) {
      std::fprintf(stderr, "qgpu_bench_interp: %s\n", result.status().to_string().c_str());
      return 1;
    }
    for (const auto& [name, v] : result->stats) {
      if (name == "warp_instructions") warp_instructions = v;
      if (name == "block_executions") blocks = v;
    }
    best = std::min(best, s);
  }
  std::printf("kernel bench_loop: 3 x 32 threads, %d iterations each\n", count);
  std::printf("block executions %lld, warp instructions %lld, best of %d: %.3f ms\n", static_cast<long long>(blocks),
              static_cast<long long>(warp_instructions), repeats, best * 1e3);
  std::printf("%.2f M warp-instructions/s, %.2f M block executions/s\n", warp_instructions / best / 1e6,
              blocks / best / 1e6);
  return 0;
}
