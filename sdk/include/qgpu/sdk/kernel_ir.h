// KernelIR: the contract between a frontend and a machine.
//
// A kernel in SSA form with block arguments (the shape of MLIR's LLVM + cf
// dialects after cleanup): values are numbered, every instruction defines at
// most one value, blocks take arguments instead of phi nodes, and every block
// ends in exactly one terminator. Semantics are those of PTX for the listed
// operations (not LLVM's: shifts clamp instead of being poison, division by
// zero is defined as PTX defines it, see the notes per opcode).
//
// Types are integers only: i1 (predicates), i8, i16, i32, i64. Pointers are
// i64 byte addresses in the address space of the access that uses them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/status.h"

namespace qgpu::sdk {

enum class IrType : std::uint8_t { kVoid, kI1, kI8, kI16, kI32, kI64 };

// Bits of an integer type (0 for void).
int ir_type_bits(IrType type);
std::string_view ir_type_name(IrType type);  // "void", "i1", "i8", ...

enum class AddressSpace : std::uint8_t { kGlobal, kShared, kGeneric };

enum class SpecialReg : std::uint8_t {
  kTidX, kTidY, kTidZ,
  kNtidX, kNtidY, kNtidZ,
  kCtaidX, kCtaidY, kCtaidZ,
  kNctaidX, kNctaidY, kNctaidZ,
  kLaneId,
  kWarpSize,  // CUDA's warp size as the kernel sees it (32); the machine decides what that means
};
std::string_view special_reg_name(SpecialReg reg);  // "tid.x", ...

enum class CmpPred : std::uint8_t { kEq, kNe, kSlt, kSle, kSgt, kSge, kUlt, kUle, kUgt, kUge };
std::string_view cmp_pred_name(CmpPred pred);

enum class AtomicOp : std::uint8_t { kAdd, kSMin, kSMax, kUMin, kUMax, kExch, kAnd, kOr, kXor, kInc, kDec, kCas };
std::string_view atomic_op_name(AtomicOp op);

enum class ShflMode : std::uint8_t { kIdx, kUp, kDown, kBfly };
enum class VoteMode : std::uint8_t { kAll, kAny, kUni, kBallot };

enum class Opcode : std::uint16_t {
  // --- values without operands
  kConst,       // result = imm (truncated to type)
  kParam,       // result = kernel parameter #imm (i32 scalar or i64 pointer)
  kSpecial,     // result = special register `special`
  kSharedAddr,  // result = byte address (i64, shared space) of shared variable #imm

  // --- integer arithmetic; operands and result share `type`
  kAdd, kSub, kMul,      // wrap-around; kMul keeps the low bits
  kMulHiS, kMulHiU,      // high half of the double-width product (PTX mul.hi)
  kSDiv, kUDiv, kSRem, kURem,  // PTX: x/0 and x%0 are unspecified there; the machine documents its choice
  kAnd, kOr, kXor, kNot, kNeg,
  kShl, kLShr, kAShr,    // PTX: shift amounts >= width clamp (shl/lshr give 0, ashr gives the sign fill)
  kSMin, kSMax, kUMin, kUMax,
  kAbs,                  // PTX abs.s: abs(INT_MIN) == INT_MIN
  kPopc, kClz, kBrev,    // result i32 for popc/clz; brev keeps the type
  kICmp,                 // result i1 = operands[0] `pred` operands[1]
  kSelect,               // result = operands[0] (i1) ? operands[1] : operands[2]
  kZExt, kSExt, kTrunc,  // to `type` from the operand's type

  // --- memory; operands[0] is the byte address, `space` its address space, `type` the access width
  kLoad,    // result = memory[addr]
  kStore,   // memory[addr] = operands[1]; no result
  kAtomic,  // result = old value; memory[addr] = old `atomic` operands[1]; kCas: operands[1] compare, operands[2] new

  // --- warp and block
  kShfl,     // result = value of operands[0] in the source lane; operands: value, lane/delta/mask, c (PTX packed
             // clamp/width: ((32 - width) << 8) | 0x1f for up/down/bfly... as in PTX shfl.sync's c operand),
             // membermask
  kShflPred, // result i1: whether the source lane of the kShfl `operands[0]` was in range (PTX's |p output)
  kVote,     // result i1 (all/any/uni) or i32 (ballot) over operands[0] (i1), operands[1] = membermask
  kBarrier,  // imm 0: bar.sync 0 / __syncthreads(), no operands; imm 1: bar.warp.sync / __syncwarp(mask), the
             // threads of one 32-thread CUDA warp, operands[0] = membermask (a block barrier is a correct, if
             // over-synchronising, implementation); no result

  // --- terminators (the last instruction of every block, and only there)
  kBr,      // to targets[0]
  kCondBr,  // operands[0] (i1) ? targets[0] : targets[1]
  kRet,     // thread exits
};
std::string_view opcode_name(Opcode op);
bool is_terminator(Opcode op);

// A value number; 0 is "no value".
using ValueId = std::uint32_t;

// A source position in the file the frontend read (PTX or CUDA), for diagnostics.
struct IrLoc {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

struct BranchTarget {
  std::uint32_t block = 0;      // index into KernelIR::blocks
  std::vector<ValueId> args;    // one per argument of the target block
};

struct Instr {
  Opcode op = Opcode::kConst;
  IrType type = IrType::kVoid;  // of the result, or of the access for kStore
  ValueId result = 0;
  std::vector<ValueId> operands;
  std::int64_t imm = 0;
  CmpPred pred = CmpPred::kEq;
  AddressSpace space = AddressSpace::kGlobal;
  AtomicOp atomic = AtomicOp::kAdd;
  ShflMode shfl = ShflMode::kIdx;
  VoteMode vote = VoteMode::kAll;
  SpecialReg special = SpecialReg::kTidX;
  std::vector<BranchTarget> targets;  // terminators only
  IrLoc loc;
};

struct Block {
  std::string label;                 // for dumps and diagnostics
  std::vector<ValueId> args;         // block arguments (values defined on entry)
  std::vector<Instr> instrs;         // the last one is the terminator
};

struct SharedVar {
  std::string name;
  std::uint64_t bytes = 0;
  std::uint32_t align = 4;
};

// One kernel parameter as CUDA declares it.
struct KernelParam {
  enum class Kind : std::uint8_t { kScalar, kPointer };
  std::string name;  // the CUDA name where the source has one, else "param<N>"
  Kind kind = Kind::kScalar;
  IrType type = IrType::kI32;  // i32 scalars (the machine's word); pointers are i64
};

struct KernelIR {
  std::string name;         // the kernel as written in the source (C++ names demangled, docs/FRONTEND.md)
  std::string source_path;  // for diagnostics
  IrLoc loc;                // of the entry directive
  std::vector<KernelParam> params;
  std::vector<SharedVar> shared;
  std::vector<Block> blocks;        // blocks[0] is the entry and has no arguments
  std::vector<IrType> value_types;  // indexed by ValueId; value_types[0] is kVoid
};

// Structural checks: every value defined once before use (dominance is not
// checked), operand counts and types per opcode, one terminator per block at
// the end, branch targets in range with matching argument counts.
Status verify_kernel_ir(const KernelIR& kernel);

// A readable listing, one instruction per line, e.g.
//   ^bb1(%4: i32):
//     %5 = add i32 %4, %3
//     cond_br %7, ^bb1(%5), ^bb2
std::string dump_kernel_ir(const KernelIR& kernel);

}  // namespace qgpu::sdk
