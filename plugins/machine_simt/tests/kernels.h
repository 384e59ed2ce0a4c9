// Kernels in KernelIR, built by hand as clang-16 -O2 shapes them, shared by the machine's
// interpreter, protocol and circuit tests.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "ir_builder.h"
#include "protocol.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt::test {

// Launch arguments: an array parameter and a scalar parameter.
inline sdk::LaunchArg arr(const std::string& name, std::vector<std::int32_t> v) {
  sdk::LaunchArg a;
  a.param = name;
  a.is_array = true;
  a.array = std::move(v);
  return a;
}
inline sdk::LaunchArg scalar(const std::string& name, std::int32_t v) {
  sdk::LaunchArg a;
  a.param = name;
  a.scalar = v;
  return a;
}

// examples/dot.cu as clang-16 -O2 emits it (one mul.wide for both addresses, setp.ge + branch to the exit).
inline sdk::KernelIR dot_kernel() {
  IrBuilder b("dot");
  const sdk::ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b"), po = b.ptr_param("out"), n = b.int_param("n");
  const sdk::ValueId i = b.global_index();
  const sdk::ValueId out_of_range = b.icmp(sdk::CmpPred::kSge, i, n);
  const int body = b.block("body"), exit = b.block("exit");
  b.at(0);
  b.cond_br(out_of_range, exit, {}, body);
  b.at(body);
  const sdk::ValueId off = b.bin(sdk::Opcode::kMul, b.sext64(i), b.c64(4));
  const sdk::ValueId prod =
      b.bin(sdk::Opcode::kMul, b.load(b.bin(sdk::Opcode::kAdd, pa, off)), b.load(b.bin(sdk::Opcode::kAdd, pb, off)));
  b.atomic(sdk::AtomicOp::kAdd, po, {prod});
  b.br(exit);
  b.at(exit);
  b.ret();
  return b.k;
}

inline sdk::KernelIR ifelse_kernel() {
  IrBuilder b("ifelse");
  const sdk::ValueId pa = b.ptr_param("a"), po = b.ptr_param("out");
  const sdk::ValueId i = b.tid();
  const sdk::ValueId v = b.load(b.element(pa, i));
  const sdk::ValueId odd = b.icmp(sdk::CmpPred::kNe, b.bin(sdk::Opcode::kAnd, v, b.c32(1)), b.c32(0));
  const int then_b = b.block("odd"), else_b = b.block("even"), join = b.block("join", {sdk::IrType::kI32});
  b.at(0);
  b.cond_br(odd, then_b, {}, else_b);
  b.at(then_b);
  b.br(join, {b.bin(sdk::Opcode::kSub, v, b.c32(100))});
  b.at(else_b);
  b.br(join, {b.bin(sdk::Opcode::kMul, v, b.c32(3))});
  b.at(join);
  b.store(b.element(po, i), b.bin(sdk::Opcode::kAdd, b.arg(join, 0), i));
  b.ret();
  return b.k;
}

inline sdk::KernelIR loop_kernel() {
  IrBuilder b("loop");
  const sdk::ValueId pa = b.ptr_param("a"), po = b.ptr_param("out");
  const sdk::ValueId i = b.tid();
  const sdk::ValueId cnt = b.load(b.element(pa, i));
  const sdk::ValueId zero = b.c32(0);
  const sdk::ValueId any = b.icmp(sdk::CmpPred::kSgt, cnt, zero);
  const int loop = b.block("loop", {sdk::IrType::kI32, sdk::IrType::kI32});
  const int exit = b.block("exit", {sdk::IrType::kI32});
  b.at(0);
  b.cond_br(any, loop, {zero, zero}, exit, {zero});
  b.at(loop);
  const sdk::ValueId j = b.arg(loop, 0), s = b.arg(loop, 1);
  const sdk::ValueId s2 = b.bin(sdk::Opcode::kAdd, s, b.bin(sdk::Opcode::kXor, j, i));
  const sdk::ValueId j2 = b.bin(sdk::Opcode::kAdd, j, b.c32(1));
  b.cond_br(b.icmp(sdk::CmpPred::kSlt, j2, cnt), loop, {j2, s2}, exit, {s2});
  b.at(exit);
  b.store(b.element(po, i), b.arg(exit, 0));
  b.ret();
  return b.k;
}

// Per thread block of `threads` (a power of two): a shared-memory tree reduction
// with barriers; thread 0 writes out[ctaid].
inline sdk::KernelIR reduce_kernel(int threads = 8) {
  IrBuilder b("reduce");
  const sdk::ValueId pin = b.ptr_param("in"), pout = b.ptr_param("out");
  b.k.shared.push_back({"s", static_cast<std::uint32_t>(4 * threads), 4});
  const sdk::ValueId t = b.tid(), gid = b.global_index();
  const sdk::ValueId mine = b.element(b.shared_addr(0), t);
  b.store(mine, b.load(b.element(pin, gid)), sdk::AddressSpace::kShared);
  b.barrier();
  const int loop = b.block("loop", {sdk::IrType::kI32});
  const int add = b.block("add"), next = b.block("next"), done = b.block("done"), write = b.block("write"),
            exit = b.block("exit");
  b.at(0);
  b.br(loop, {b.c32(threads / 2)});
  b.at(loop);
  const sdk::ValueId stride = b.arg(loop, 0);
  b.cond_br(b.icmp(sdk::CmpPred::kSlt, t, stride), add, {}, next);
  b.at(add);
  const sdk::ValueId x = b.load(mine, sdk::AddressSpace::kShared);
  const sdk::ValueId y =
      b.load(b.element(b.shared_addr(0), b.bin(sdk::Opcode::kAdd, t, stride)), sdk::AddressSpace::kShared);
  b.store(mine, b.bin(sdk::Opcode::kAdd, x, y), sdk::AddressSpace::kShared);
  b.br(next);
  b.at(next);
  b.barrier();
  const sdk::ValueId half = b.bin(sdk::Opcode::kLShr, stride, b.c32(1));
  b.cond_br(b.icmp(sdk::CmpPred::kNe, half, b.c32(0)), loop, {half}, done);
  b.at(done);
  b.cond_br(b.icmp(sdk::CmpPred::kEq, t, b.c32(0)), write, {}, exit);
  b.at(write);
  b.store(b.element(pout, b.ctaid()), b.load(b.shared_addr(0), sdk::AddressSpace::kShared));
  b.br(exit);
  b.at(exit);
  b.ret();
  return b.k;
}

inline sdk::KernelIR atomics_kernel() {
  IrBuilder b("atomics");
  const sdk::ValueId pa = b.ptr_param("a"), pm = b.ptr_param("m");
  const sdk::ValueId i = b.global_index();
  b.atomic(sdk::AtomicOp::kSMax, pm, {b.load(b.element(pa, i))});
  const sdk::ValueId old = b.atomic(sdk::AtomicOp::kExch, b.bin(sdk::Opcode::kAdd, pm, b.c64(36)), {i});
  b.store(b.element(pm, b.bin(sdk::Opcode::kAdd, i, b.c32(1))), old);
  b.atomic(sdk::AtomicOp::kCas, b.bin(sdk::Opcode::kAdd, pm, b.c64(40)),
           {b.c32(0), b.bin(sdk::Opcode::kAdd, i, b.c32(1))});
  b.ret();
  return b.k;
}

inline sdk::KernelIR vadd_kernel() {
  IrBuilder b("vadd");
  const sdk::ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b"), pc = b.ptr_param("c"), n = b.int_param("n");
  const sdk::ValueId i = b.global_index();
  const sdk::ValueId out = b.icmp(sdk::CmpPred::kSge, i, n);
  const int body = b.block("body"), exit = b.block("exit");
  b.at(0);
  b.cond_br(out, exit, {}, body);
  b.at(body);
  const sdk::ValueId s = b.bin(sdk::Opcode::kAdd, b.load(b.element(pa, i)), b.load(b.element(pb, i)));
  b.store(b.element(pc, i), s);
  b.br(exit);
  b.at(exit);
  b.ret();
  return b.k;
}

// The dot product with the guard as `if (i < n)` and plain element addressing.
inline sdk::KernelIR dot_guarded_kernel() {
  IrBuilder b("dot");
  const sdk::ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b"), po = b.ptr_param("out"), n = b.int_param("n");
  const sdk::ValueId i = b.global_index();
  const sdk::ValueId in = b.icmp(sdk::CmpPred::kSlt, i, n);
  const int body = b.block("body"), exit = b.block("exit");
  b.at(0);
  b.cond_br(in, body, {}, exit);
  b.at(body);
  b.atomic(sdk::AtomicOp::kAdd, po, {b.bin(sdk::Opcode::kMul, b.load(b.element(pa, i)), b.load(b.element(pb, i)))});
  b.br(exit);
  b.at(exit);
  b.ret();
  return b.k;
}

// out[i] = x[i] + __shfl_sync(0xf, x[i], 2, 4): the add overwrites the shuffle's source
// register in the block that exits, so exiting lanes write back a register only because a
// shuffle reads it (PROTOCOL.md §3.3, the `LIVE exited` row). i = ctaid·8 + tid (blocks of at
// most 8 threads) without a multiply, which would end its block (docs/ISA.md §6) and move the
// shuffle out of the exiting block.
inline sdk::KernelIR shfl_add_kernel() {
  IrBuilder b("shfl_add");
  const sdk::ValueId px = b.ptr_param("x"), pout = b.ptr_param("out");
  const sdk::ValueId i = b.bin(sdk::Opcode::kAdd, b.bin(sdk::Opcode::kShl, b.ctaid(), b.c32(3)), b.tid());
  const sdk::ValueId v = b.load(b.element(px, i));
  b.store(b.element(pout, i), b.bin(sdk::Opcode::kAdd, v, b.shfl(sdk::ShflMode::kIdx, v, b.c32(2), 4)));
  b.ret();
  return b.k;
}

// 8- and 16-bit memory as clang emits it for char and short arrays (little-endian bytes in words),
// thread i:
//   out[3i] = (signed char)in8[i]; out[3i+1] = (unsigned short)in16[i]; out[3i+2] = (short)in16[i];
//   o8[2i+1] = in8[i] + 1 (odd bytes: two lanes of a warp write one word, the even bytes stay);
//   o16[i] = in16[i] * 3 (two lanes per word).
// in8 is read through a generic pointer whose origin (the parameter) makes it global.
inline sdk::KernelIR subword_kernel() {
  using sdk::IrType;
  using sdk::Opcode;
  IrBuilder b("subword");
  const sdk::ValueId p8 = b.ptr_param("in8"), p16 = b.ptr_param("in16"), po8 = b.ptr_param("o8"),
                     po16 = b.ptr_param("o16"), pout = b.ptr_param("out");
  const sdk::ValueId i = b.tid(), i64 = b.sext64(i);
  const sdk::ValueId twice = b.bin(Opcode::kShl, i64, b.c64(1));
  const sdk::ValueId v8 = b.load(b.bin(Opcode::kAdd, p8, i64), sdk::AddressSpace::kGeneric, IrType::kI8);
  const sdk::ValueId v16 = b.load(b.bin(Opcode::kAdd, p16, twice), sdk::AddressSpace::kGlobal, IrType::kI16);
  const sdk::ValueId base = b.bin(Opcode::kMul, i, b.c32(3));
  auto put = [&](int k, sdk::ValueId v) { b.store(b.element(pout, b.bin(Opcode::kAdd, base, b.c32(k))), v); };
  put(0, b.un(Opcode::kSExt, v8, IrType::kI32));
  put(1, b.un(Opcode::kZExt, v16, IrType::kI32));
  put(2, b.un(Opcode::kSExt, v16, IrType::kI32));
  b.store(b.bin(Opcode::kAdd, b.bin(Opcode::kAdd, po8, twice), b.c64(1)),
          b.bin(Opcode::kAdd, v8, b.emit(Opcode::kConst, IrType::kI8, {}, 1)));
  b.store(b.bin(Opcode::kAdd, po16, twice), b.bin(Opcode::kMul, v16, b.emit(Opcode::kConst, IrType::kI16, {}, 3)));
  b.ret();
  return b.k;
}

// A launch of one of the kernels above.
struct LaunchCase {
  std::string name;
  sdk::KernelIR kernel;
  sdk::LaunchShape shape;
  std::vector<sdk::LaunchArg> args;
};

// Twenty words loaded by each thread from its own row of `a` (all live at once), then summed in
// reverse order into the row's first word: more live values than r1-r15.
inline sdk::KernelIR pressure_kernel() {
  IrBuilder b("pressure");
  const sdk::ValueId pa = b.ptr_param("a");
  const sdk::ValueId row = b.element(pa, b.bin(sdk::Opcode::kMul, b.tid(), b.c32(20)));
  std::vector<sdk::ValueId> v;
  for (int k = 0; k < 20; ++k) v.push_back(b.load(b.bin(sdk::Opcode::kAdd, row, b.c64(4 * k))));
  sdk::ValueId s = v.back();
  for (int k = 18; k >= 0; --k) s = b.bin(sdk::Opcode::kAdd, s, v[k]);
  b.store(row, s);
  b.ret();
  return b.k;
}

// The machine config of the circuit tests: the defaults with the ROM the token layout addresses.
inline MachineConfig circuit_sizes() {
  MachineConfig c;
  c.rom_blocks = kProtoBlocks;
  return c;
}

// A ladder of `rungs` blocks: each adds its index to x and passes on 3x + 1 where x is odd and
// x >> 1 where it is even; the lanes diverge at every rung and meet again at the next. Each
// phi edge is a block of its own, so 24 rungs lower to far more blocks than 32: block numbers
// above 31 in EXEC, SCHED, LIVE and branch targets (the layout's 7-bit fields).
inline sdk::KernelIR ladder_kernel(int rungs = 24) {
  IrBuilder b("ladder");
  const sdk::ValueId pa = b.ptr_param("a");
  const sdk::ValueId i = b.tid();
  const sdk::ValueId x0 = b.load(b.element(pa, i));
  std::vector<int> rung;
  for (int r = 0; r <= rungs; ++r) rung.push_back(b.block("rung" + std::to_string(r), {sdk::IrType::kI32}));
  b.at(0);
  b.br(rung[0], {x0});
  for (int r = 0; r < rungs; ++r) {
    b.at(rung[r]);
    const sdk::ValueId x = b.bin(sdk::Opcode::kAdd, b.arg(rung[r], 0), b.c32(r));
    const sdk::ValueId odd = b.icmp(sdk::CmpPred::kNe, b.bin(sdk::Opcode::kAnd, x, b.c32(1)), b.c32(0));
    const sdk::ValueId up = b.bin(sdk::Opcode::kAdd, b.bin(sdk::Opcode::kMul, x, b.c32(3)), b.c32(1));
    const sdk::ValueId down = b.bin(sdk::Opcode::kLShr, x, b.c32(1));
    b.cond_br(odd, rung[r + 1], {up}, rung[r + 1], {down});
  }
  b.at(rung[rungs]);
  b.store(b.element(pa, i), b.arg(rung[rungs], 0));
  b.ret();
  return b.k;
}

// Real launches the circuit tests replay: every terminator kind, barriers with the parity over
// several SYNCs, 8 warps, partial warps, several thread blocks, atomics, all lanes exiting at once.
inline std::vector<LaunchCase> real_launches() {
  std::vector<LaunchCase> v;
  v.push_back(
      {"dot 1x4", dot_kernel(), {1, 4}, {arr("a", {1, 2, 3}), arr("b", {4, 5, 6}), arr("out", {0}), scalar("n", 3)}});
  {
    std::vector<std::int32_t> a(24), b(24);
    for (int i = 0; i < 24; ++i) a[i] = i - 11, b[i] = 3 * i + 1;
    v.push_back({"dot 3x8 (thread blocks)",
                 dot_kernel(),
                 {3, 8},
                 {arr("a", a), arr("b", b), arr("out", {0}), scalar("n", 20)}});
  }
  v.push_back({"ifelse 1x8 (divergent branch)",
               ifelse_kernel(),
               {1, 8},
               {arr("a", {3, -8, 7, 10, 0, 5, -3, 12}), arr("out", std::vector<std::int32_t>(8, 0))}});
  v.push_back({"loop 1x7 (trip counts, partial warp)",
               loop_kernel(),
               {1, 7},
               {arr("a", {3, 0, 5, 1, -2, 7, 2}), arr("out", std::vector<std::int32_t>(7, 99))}});
  {
    std::vector<std::int32_t> in(16);
    for (int i = 0; i < 16; ++i) in[i] = 7 * i - 40;
    v.push_back(
        {"reduce 2x8 (barriers, parity over 4 SYNCs)", reduce_kernel(), {2, 8}, {arr("in", in), arr("out", {0, 0})}});
  }
  {
    std::vector<std::int32_t> in(32);
    for (int i = 0; i < 32; ++i) in[i] = i * i - 100;
    v.push_back({"reduce 1x32 (8 warps, 6 SYNCs)", reduce_kernel(32), {1, 32}, {arr("in", in), arr("out", {0})}});
  }
  {
    std::vector<std::int32_t> a(10), b(10), c(10, -7);
    for (int i = 0; i < 10; ++i) a[i] = i * i, b[i] = 50000 * i;
    v.push_back(
        {"vadd 2x5 (partial warps)", vadd_kernel(), {2, 5}, {arr("a", a), arr("b", b), arr("c", c), scalar("n", 9)}});
  }
  v.push_back({"atomics 2x4",
               atomics_kernel(),
               {2, 4},
               {arr("a", {5, -9, 300, 42, 7, 100000, -1, 8}), arr("m", std::vector<std::int32_t>(11, 0))}});
  v.push_back({"subword 1x8 (bytes and halfwords, lanes sharing a word)",
               subword_kernel(),
               {1, 8},
               {arr("in8", {static_cast<std::int32_t>(0x807f01ffu), 0x12345678}),
                arr("in16", {static_cast<std::int32_t>(0x8000ffffu), 0x00017fff, 0x12345678,
                             static_cast<std::int32_t>(0xfedcba98u)}),
                arr("o8", {0x11111111, 0x22222222, 0x33333333, 0x44444444}), arr("o16", {-1, -1, -1, -1}),
                arr("out", std::vector<std::int32_t>(24, 0))}});
  v.push_back({"ladder 1x4 (more than 32 blocks, lanes diverging at every rung)",
               ladder_kernel(),
               {1, 4},
               {arr("a", {7, 12, -5, 1000})}});
  {
    std::vector<std::int32_t> a(80);
    for (int i = 0; i < 80; ++i) a[i] = 1000 * (i % 20) - 37 * i;
    v.push_back({"pressure 1x4 (values spilled to shared memory)", pressure_kernel(), {1, 4}, {arr("a", a)}});
  }
  v.push_back({"dot 2x3 (all lanes exit at once, n = 0)",
               dot_kernel(),
               {2, 3},
               {arr("a", {1}), arr("b", {1}), arr("out", {0}), scalar("n", 0)}});
  return v;
}

}  // namespace qgpu::simt::test
