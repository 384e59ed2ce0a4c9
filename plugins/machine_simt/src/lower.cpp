#include "lower.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

namespace qgpu::simt {
namespace {

using sdk::ErrorCode;
using sdk::IrType;
using sdk::Opcode;
using sdk::Status;
using sdk::ValueId;

// The SDK's names, so diagnostics spell opcodes and types as `qgpu-ptx` dumps do.
int bits_of(IrType t) { return sdk::ir_type_bits(t); }
std::string type_str(IrType t) { return std::string(sdk::ir_type_name(t)); }
std::string op_str(Opcode op) { return std::string(sdk::opcode_name(op)); }
bool ir_terminator(Opcode op) { return sdk::is_terminator(op); }

// A machine operand before register allocation.
struct MOp {
  enum class K : std::uint8_t { kNone, kZero, kVReg, kImm, kSpecial };
  K k = K::kNone;
  int vreg = -1;
  std::uint32_t imm = 0;
  int reloc = -1;
  Special sp = Special::kTid;

  static MOp reg(int v) { return {K::kVReg, v, 0, -1, Special::kTid}; }
  static MOp zero() { return {K::kZero, -1, 0, -1, Special::kTid}; }
  static MOp imm_of(std::uint32_t v, int reloc = -1) { return {K::kImm, -1, v, reloc, Special::kTid}; }
  static MOp special(Special s) { return {K::kSpecial, -1, 0, -1, s}; }
  bool is_plain_imm() const { return k == K::kImm && reloc < 0; }
  bool is_reg() const { return k == K::kVReg || k == K::kZero; }
};

struct MInst {
  Op op = Op::kNop;
  int d = -1;
  MOp a, b, c;
  std::uint8_t flags = 0;
  std::uint32_t imm = 0;  // memory offset
  int reloc = -1;
  bool pcopy = false;
  std::vector<std::pair<int, MOp>> copies;  // parallel copy: dst vreg <- src
  sdk::IrLoc loc;
};

struct MTerm {
  Op op = Op::kExit;
  int cond = -1;
  int t = -1, f = -1;  // machine block ids
  sdk::IrLoc loc;
};

struct MBlock {
  std::string label;
  std::vector<MInst> code;
  MTerm term;
};

// What a KernelIR value is during instruction selection.
enum class VK : std::uint8_t { kNone, kReg, kConst, kSpecial, kRegOff, kMulPending };
struct LVal {
  VK k = VK::kNone;
  int vreg = -1;
  std::uint32_t imm = 0;
  int reloc = -1;
  Special sp = Special::kTid;
  MOp ma, mb;  // kMulPending operands
};

enum class Origin : std::uint8_t { kUnknown, kGlobal, kShared, kMixed };
Origin join(Origin a, Origin b) {
  if (a == Origin::kUnknown) return b;
  if (b == Origin::kUnknown || a == b) return a;
  return Origin::kMixed;
}

class Bits {
 public:
  explicit Bits(std::size_t n = 0) : w_((n + 63) / 64, 0) {}
  void set(std::size_t i) { w_[i / 64] |= 1ull << (i % 64); }
  void reset(std::size_t i) { w_[i / 64] &= ~(1ull << (i % 64)); }
  bool test(std::size_t i) const { return (w_[i / 64] >> (i % 64)) & 1; }
  bool merge(const Bits& o) {
    bool changed = false;
    for (std::size_t i = 0; i < w_.size(); ++i) {
      const std::uint64_t v = w_[i] | o.w_[i];
      changed |= v != w_[i];
      w_[i] = v;
    }
    return changed;
  }
  int count() const {
    int n = 0;
    for (auto x : w_) n += std::popcount(x);
    return n;
  }
  template <typename F>
  void each(F f) const {
    for (std::size_t i = 0; i < w_.size(); ++i)
      for (std::uint64_t x = w_[i]; x; x &= x - 1) f(i * 64 + std::countr_zero(x));
  }

 private:
  std::vector<std::uint64_t> w_;
};

class Lowerer {
 public:
  Lowerer(const sdk::KernelIR& k, const sdk::LaunchShape& shape, const MachineConfig& cfg)
      : k_(k), shape_(shape), cfg_(cfg) {}

  sdk::Expected<std::unique_ptr<Program>> run() {
    QGPU_RETURN_IF_ERROR(check_launch());
    QGPU_RETURN_IF_ERROR(check_structure());
    QGPU_RETURN_IF_ERROR(layout_shared());
    order_blocks();
    analyse_uses();
    compute_origins();
    compute_wide();
    QGPU_RETURN_IF_ERROR(select());
    return allocate_and_emit();
  }

 private:
  // ---------------------------------------------------------------- diagnostics
  Status err(ErrorCode code, sdk::IrLoc loc, const std::string& msg) const {
    const std::string m = "kernel '" + k_.name + "': " + msg;
    if (loc.line == 0) return Status(code, m);
    const std::string file = k_.source_path.empty() ? std::string("<kernel>") : k_.source_path;
    return sdk::error_at(file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column), code, m);
  }
  Status err_at(const sdk::Instr& in, ErrorCode code, const std::string& msg) const { return err(code, in.loc, msg); }
  Status unsupported(const sdk::Instr& in, const std::string& msg) const {
    return err_at(in, ErrorCode::kUnsupported, msg);
  }
  Status limit(const std::string& what, long need, long have, const std::string& unit_and_context) const {
    return err(ErrorCode::kLimitExceeded, k_.loc,
               what + " needs " + std::to_string(need) + " " + unit_and_context + ", the machine has " +
                   std::to_string(have) + " (over by " + std::to_string(need - have) + ")");
  }

  // ---------------------------------------------------------------- checks
  Status check_launch() const {
    if (shape_.grid == 0 || shape_.block == 0)
      return sdk::invalid_argument("kernel '" + k_.name + "': launch of grid " + std::to_string(shape_.grid) +
                                   " x block " + std::to_string(shape_.block) + " has no threads");
    if (shape_.block > static_cast<std::uint32_t>(cfg_.max_block_threads))
      return err(ErrorCode::kLimitExceeded, {},
                 "thread block of " + std::to_string(shape_.block) + " threads exceeds max_block_threads " +
                     std::to_string(cfg_.max_block_threads) + " (over by " +
                     std::to_string(shape_.block - cfg_.max_block_threads) + ")");
    const std::uint64_t threads = static_cast<std::uint64_t>(shape_.grid) * shape_.block;
    if (threads > static_cast<std::uint64_t>(cfg_.max_threads))
      return err(ErrorCode::kLimitExceeded, {},
                 "launch of " + std::to_string(threads) + " threads (grid " + std::to_string(shape_.grid) +
                     " x block " + std::to_string(shape_.block) + ") exceeds max_threads " +
                     std::to_string(cfg_.max_threads) + " (over by " + std::to_string(threads - cfg_.max_threads) +
                     ")");
    return {};
  }

  Status check_structure() {
    const std::size_t nvals = k_.value_types.size();
    if (k_.blocks.empty()) return err(ErrorCode::kInvalidArgument, k_.loc, "has no blocks");
    if (!k_.blocks[0].args.empty()) return err(ErrorCode::kInvalidArgument, k_.loc, "entry block has arguments");
    def_.assign(nvals, nullptr);
    for (std::size_t b = 0; b < k_.blocks.size(); ++b) {
      const sdk::Block& blk = k_.blocks[b];
      if (blk.instrs.empty() || !ir_terminator(blk.instrs.back().op))
        return err(ErrorCode::kInvalidArgument, k_.loc, "block " + label(b) + " does not end in a terminator");
      for (ValueId a : blk.args)
        if (a == 0 || a >= nvals) return err(ErrorCode::kInvalidArgument, k_.loc, "block argument out of range");
      for (std::size_t i = 0; i < blk.instrs.size(); ++i) {
        const sdk::Instr& in = blk.instrs[i];
        if (ir_terminator(in.op) && i + 1 != blk.instrs.size())
          return err_at(in, ErrorCode::kInvalidArgument, "terminator in the middle of block " + label(b));
        for (ValueId v : in.operands)
          if (v == 0 || v >= nvals)
            return err_at(in, ErrorCode::kInvalidArgument,
                          op_str(in.op) + " uses value %" + std::to_string(v) + " outside the value table");
        if (in.result != 0) {
          if (in.result >= nvals)
            return err_at(in, ErrorCode::kInvalidArgument, "result %" + std::to_string(in.result) + " out of range");
          def_[in.result] = &in;
        }
        for (const sdk::BranchTarget& t : in.targets) {
          if (t.block >= k_.blocks.size())
            return err_at(in, ErrorCode::kInvalidArgument,
                          "branch to block " + std::to_string(t.block) + " of " + std::to_string(k_.blocks.size()));
          if (t.args.size() != k_.blocks[t.block].args.size())
            return err_at(in, ErrorCode::kInvalidArgument,
                          "branch to " + label(t.block) + " passes " + std::to_string(t.args.size()) +
                              " arguments, the block takes " + std::to_string(k_.blocks[t.block].args.size()));
          for (ValueId v : t.args)
            if (v == 0 || v >= nvals) return err_at(in, ErrorCode::kInvalidArgument, "branch argument out of range");
        }
        const std::size_t want = in.op == Opcode::kBr ? 1 : in.op == Opcode::kCondBr ? 2 : 0;
        if (in.targets.size() != want)
          return err_at(in, ErrorCode::kInvalidArgument,
                        op_str(in.op) + " has " + std::to_string(in.targets.size()) + " targets, expected " +
                            std::to_string(want));
      }
    }
    return {};
  }

  std::string label(std::size_t b) const {
    return k_.blocks[b].label.empty() ? "bb" + std::to_string(b) : k_.blocks[b].label;
  }

  Status layout_shared() {
    std::uint64_t off = 0;
    for (const sdk::SharedVar& v : k_.shared) {
      const std::uint64_t align = std::max<std::uint64_t>(4, v.align);
      off = (off + align - 1) / align * align;
      shared_off_.push_back(off);
      off += v.bytes;
    }
    shared_words_ = static_cast<int>((off + 3) / 4);
    if (shared_words_ > cfg_.shared_words)
      return limit("shared memory", shared_words_, cfg_.shared_words, "words per thread block");
    return {};
  }

  // ---------------------------------------------------------------- block order
  // Reverse post-order in which a loop's exits are visited first by the DFS so
  // that they come after the whole loop: then "run the lowest pending block"
  // finishes a loop (and both arms of an if) before the code after it.
  void order_blocks() {
    const std::size_t n = k_.blocks.size();
    std::vector<std::vector<std::size_t>> succ(n), pred(n);
    for (std::size_t b = 0; b < n; ++b)
      for (const auto& t : k_.blocks[b].instrs.back().targets) {
        succ[b].push_back(t.block);
        pred[t.block].push_back(b);
      }
    // Back edges (to a block on the DFS stack) and their natural loops.
    std::vector<int> state(n, 0);
    std::vector<std::pair<std::size_t, std::size_t>> back;
    std::function<void(std::size_t)> dfs = [&](std::size_t b) {
      state[b] = 1;
      for (std::size_t s : succ[b]) {
        if (state[s] == 1)
          back.emplace_back(b, s);
        else if (state[s] == 0)
          dfs(s);
      }
      state[b] = 2;
    };
    dfs(0);
    std::vector<std::set<std::size_t>> loops_of(n);  // headers of the loops containing b
    for (auto [tail, head] : back) {
      std::vector<bool> in(n, false);
      in[head] = true;
      std::vector<std::size_t> work{tail};
      while (!work.empty()) {
        std::size_t x = work.back();
        work.pop_back();
        if (in[x]) continue;
        in[x] = true;
        for (std::size_t p : pred[x]) work.push_back(p);
      }
      for (std::size_t x = 0; x < n; ++x)
        if (in[x]) loops_of[x].insert(head);
    }
    std::vector<bool> seen(n, false);
    std::vector<std::size_t> post;
    std::function<void(std::size_t)> visit = [&](std::size_t b) {
      seen[b] = true;
      std::vector<std::size_t> s(succ[b].rbegin(), succ[b].rend());
      // Successors outside one of b's loops first (they end up later in RPO).
      std::stable_sort(s.begin(), s.end(), [&](std::size_t x, std::size_t y) {
        auto leaves = [&](std::size_t t) {
          return !std::includes(loops_of[t].begin(), loops_of[t].end(), loops_of[b].begin(), loops_of[b].end());
        };
        return leaves(x) && !leaves(y);
      });
      for (std::size_t t : s)
        if (!seen[t]) visit(t);
      post.push_back(b);
    };
    visit(0);
    order_.assign(post.rbegin(), post.rend());
    reachable_ = seen;
  }

  // ---------------------------------------------------------------- uses
  struct Use {
    const sdk::Instr* user;
    int index;  // operand index, or -1 for a branch argument
  };

  void analyse_uses() {
    uses_.assign(k_.value_types.size(), {});
    for (std::size_t b = 0; b < k_.blocks.size(); ++b) {
      if (!reachable_[b]) continue;
      for (const sdk::Instr& in : k_.blocks[b].instrs) {
        for (std::size_t i = 0; i < in.operands.size(); ++i)
          uses_[in.operands[i]].push_back({&in, static_cast<int>(i)});
        for (const auto& t : in.targets)
          for (ValueId v : t.args) uses_[v].push_back({&in, -1});
      }
    }
    block_of_.clear();
    for (std::size_t b = 0; b < k_.blocks.size(); ++b)
      for (const sdk::Instr& in : k_.blocks[b].instrs) block_of_[&in] = b;
  }

  bool is_alias_op(const sdk::Instr& in) const {
    if (in.op != Opcode::kZExt && in.op != Opcode::kSExt && in.op != Opcode::kTrunc) return false;
    if (in.operands.size() != 1) return false;
    const int from = bits_of(type(in.operands[0])), to = bits_of(in.type);
    if (in.op == Opcode::kZExt && from == 1 && to >= 32) return true;
    return (from == 32 || from == 64) && (to == 32 || to == 64);
  }

  bool const_def(ValueId v) const {
    const sdk::Instr* d = def_[v];
    if (d == nullptr) return false;
    if (d->op == Opcode::kConst || d->op == Opcode::kParam || d->op == Opcode::kSharedAddr) return true;
    return is_alias_op(*d) && const_def(d->operands[0]);
  }

  // Whether every use of v is (through renames and constant offsets) a memory address.
  bool addr_only(ValueId v, int depth = 0) const {
    if (uses_[v].empty() || depth > 16) return false;
    for (const Use& u : uses_[v]) {
      const sdk::Instr& in = *u.user;
      if (u.index == 0 && (in.op == Opcode::kLoad || in.op == Opcode::kStore || in.op == Opcode::kAtomic)) continue;
      if (u.index == 0 && is_alias_op(in) && addr_only(in.result, depth + 1)) continue;
      if ((in.op == Opcode::kAdd || (in.op == Opcode::kSub && u.index == 0)) && in.operands.size() == 2 &&
          const_def(in.operands[1 - u.index]) && addr_only(in.result, depth + 1))
        continue;
      return false;
    }
    return true;
  }

  void compute_origins() {
    origin_.assign(k_.value_types.size(), Origin::kUnknown);
    for (bool changed = true; changed;) {
      changed = false;
      auto set = [&](ValueId v, Origin o) {
        const Origin j = join(origin_[v], o);
        if (j != origin_[v]) {
          origin_[v] = j;
          changed = true;
        }
      };
      for (std::size_t b = 0; b < k_.blocks.size(); ++b) {
        if (!reachable_[b]) continue;
        for (const sdk::Instr& in : k_.blocks[b].instrs) {
          switch (in.op) {
            case Opcode::kParam:
              if (in.imm >= 0 && static_cast<std::size_t>(in.imm) < k_.params.size() &&
                  k_.params[in.imm].kind == sdk::KernelParam::Kind::kPointer)
                set(in.result, Origin::kGlobal);
              break;
            case Opcode::kSharedAddr: set(in.result, Origin::kShared); break;
            case Opcode::kAdd:
            case Opcode::kSub:
            case Opcode::kZExt:
            case Opcode::kSExt:
            case Opcode::kTrunc:
            case Opcode::kAnd:
            case Opcode::kOr:
              for (ValueId v : in.operands) set(in.result, origin_[v]);
              break;
            case Opcode::kSelect:
              if (in.operands.size() == 3) {
                set(in.result, origin_[in.operands[1]]);
                set(in.result, origin_[in.operands[2]]);
              }
              break;
            default: break;
          }
          for (const auto& t : in.targets)
            for (std::size_t i = 0; i < t.args.size(); ++i) set(k_.blocks[t.block].args[i], origin_[t.args[i]]);
        }
      }
    }
  }

  IrType type(ValueId v) const { return v < k_.value_types.size() ? k_.value_types[v] : IrType::kVoid; }

  // ---------------------------------------------------------------- emission helpers
  int newv() { return nv_++; }

  MInst& push(MInst mi) {
    mi.loc = loc_;
    mb_[cur_].code.push_back(std::move(mi));
    return mb_[cur_].code.back();
  }

  // d <- op(a, b, c) into an existing or (d < 0) a new virtual register.
  int alu_to(int d, Op op, MOp a, MOp b = {}, MOp c = {}) {
    if (a.k == MOp::K::kImm && b.k == MOp::K::kImm) a = MOp::reg(alu_to(-1, Op::kMov, a));
    if (d < 0) d = newv();
    MInst mi;
    mi.op = op;
    mi.d = d;
    mi.a = a;
    mi.b = b;
    mi.c = c;
    push(std::move(mi));
    return d;
  }
  int alu(Op op, MOp a, MOp b = {}, MOp c = {}) { return alu_to(-1, op, a, b, c); }

  // Like alu() but folds when both operands are plain immediates, and drops identities
  // (x + 0, x & -1, x * 1, x << 0, ...) that the expansions produce with constant operands.
  MOp calc(Op op, MOp a, MOp b = {}) {
    if (a.is_plain_imm() && (b.k == MOp::K::kNone || b.is_plain_imm())) return MOp::imm_of(eval(op, a.imm, b.imm, 0));
    const bool commutes = op == Op::kAdd || op == Op::kMul || op == Op::kAnd || op == Op::kOr || op == Op::kXor;
    if (commutes && a.is_plain_imm()) std::swap(a, b);
    if (b.is_plain_imm()) {
      const std::uint32_t k = b.imm;
      switch (op) {
        case Op::kAdd:
        case Op::kSub:
        case Op::kOr:
        case Op::kXor:
        case Op::kShl:
        case Op::kShr:
        case Op::kSra:
          if (k == 0) return a;
          break;
        case Op::kAnd:
          if (k == 0xffffffffu) return a;
          if (k == 0) return imm(0);
          break;
        case Op::kMul:
          if (k == 1) return a;
          if (k == 0) return imm(0);
          if (std::has_single_bit(k))
            return MOp::reg(alu(Op::kShl, a, imm(static_cast<std::uint32_t>(std::countr_zero(k)))));
          break;
        default: break;
      }
    }
    return MOp::reg(alu(op, a, b));
  }

  MOp imm(std::uint32_t v) { return MOp::imm_of(v); }

  MOp resolve(LVal& v) {
    switch (v.k) {
      case VK::kReg: return MOp::reg(v.vreg);
      case VK::kConst: return MOp::imm_of(v.imm, v.reloc);
      case VK::kSpecial: return MOp::special(v.sp);
      case VK::kRegOff: return MOp::reg(alu(Op::kAdd, MOp::reg(v.vreg), MOp::imm_of(v.imm, v.reloc)));
      case VK::kMulPending: {
        const int d = emit_mul(v.ma, v.mb);
        v = reg_val(d);
        return MOp::reg(d);
      }
      case VK::kNone: break;
    }
    return {};
  }

  // A register operand (r0 for a plain 0).
  MOp as_reg(MOp m) {
    if (m.is_reg()) return m;
    if (m.is_plain_imm() && m.imm == 0) return MOp::zero();
    return MOp::reg(alu(Op::kMov, m));
  }

  int emit_mul(MOp a, MOp b) {
    if (a.is_plain_imm()) std::swap(a, b);
    if (b.is_plain_imm() && b.imm != 0 && std::has_single_bit(b.imm))
      return alu(Op::kShl, a, imm(static_cast<std::uint32_t>(std::countr_zero(b.imm))));
    return alu(Op::kMul, a, b);
  }

  static LVal reg_val(int vreg) {
    LVal l;
    l.k = VK::kReg;
    l.vreg = vreg;
    return l;
  }
  LVal const_val(std::uint32_t v, int reloc = -1) {
    LVal l;
    l.k = VK::kConst;
    l.imm = v;
    l.reloc = reloc;
    return l;
  }
  LVal from(MOp m) {
    switch (m.k) {
      case MOp::K::kImm: return const_val(m.imm, m.reloc);
      case MOp::K::kZero: return const_val(0);
      case MOp::K::kSpecial: {
        LVal l;
        l.k = VK::kSpecial;
        l.sp = m.sp;
        return l;
      }
      case MOp::K::kVReg: return reg_val(m.vreg);
      case MOp::K::kNone: break;
    }
    return LVal{};
  }

  sdk::Expected<LVal*> value(const sdk::Instr& in, ValueId v) {
    if (val_[v].k == VK::kNone)
      return err_at(in, ErrorCode::kInvalidArgument,
                    op_str(in.op) + " uses %" + std::to_string(v) + " before its definition (or it is never defined)");
    return &val_[v];
  }

  // ---------------------------------------------------------------- selection
  Status select() {
    val_.assign(k_.value_types.size(), LVal{});
    chain_.assign(k_.blocks.size(), {});
    edge_before_.assign(k_.blocks.size(), {});
    for (std::size_t b : order_) {
      chain_[b].push_back(new_block(label(b)));
      for (ValueId a : k_.blocks[b].args) {
        if (bits_of(type(a)) == 0)
          return err(ErrorCode::kUnsupported, k_.loc,
                     "block argument %" + std::to_string(a) + " of " + label(b) + " has type " + type_str(type(a)) +
                         "; the machine computes i1, i32 and i64 (as its low 32 bits) only");
        val_[a] = uses_[a].empty() ? LVal{} : reg_val(newv());
        if (wide_[a]) hi_[a] = MOp::reg(newv());
        if (uses_[a].empty()) dead_arg_.insert(a);
      }
    }
    for (std::size_t b : order_) {
      cur_ir_ = b;
      cur_ = chain_[b][0];
      for (const sdk::Instr& in : k_.blocks[b].instrs) {
        loc_ = in.loc;
        QGPU_RETURN_IF_ERROR(select_one(in));
      }
    }
    return {};
  }

  int new_block(std::string label) {
    mb_.push_back(MBlock{std::move(label), {}, {}});
    return static_cast<int>(mb_.size() - 1);
  }
  // Starts a new machine block in the current IR block's chain.
  int chain_block(const std::string& suffix) {
    const int id = new_block(label(cur_ir_) + "." + suffix);
    chain_[cur_ir_].push_back(id);
    return id;
  }

  Status need(const sdk::Instr& in, std::size_t n) const {
    if (in.operands.size() != n)
      return err_at(
          in, ErrorCode::kInvalidArgument,
          op_str(in.op) + " has " + std::to_string(in.operands.size()) + " operands, expected " + std::to_string(n));
    if (n > 0 && in.result == 0 && in.op != Opcode::kStore && in.op != Opcode::kAtomic && in.op != Opcode::kBarrier &&
        !ir_terminator(in.op))
      return err_at(in, ErrorCode::kInvalidArgument, op_str(in.op) + " has no result value");
    return {};
  }

  // Types the machine computes: i1 (0/1), i32; i64, i16 and i8 live in a word as their low bits, which
  // is exact for operations whose low bits do not depend on higher ones (i8/i16 values are sign- or
  // zero-extended first where an operation needs them whole).
  Status need_word(const sdk::Instr& in, IrType t, bool i64_ok, bool i1_ok = false, bool narrow_ok = false) const {
    const int bits = bits_of(t);
    if (bits == 32 || (bits == 64 && i64_ok) || (bits == 1 && i1_ok) || ((bits == 8 || bits == 16) && narrow_ok))
      return {};
    if (bits == 64)
      return unsupported(in, "i64 " + op_str(in.op) +
                                 " is not supported: the machine keeps 64-bit values as their low 32 bits, which is "
                                 "exact only for address arithmetic (add, sub, mul, shl, and/or/xor, compares, "
                                 "sext/zext/trunc)");
    return unsupported(in, type_str(t) + " " + op_str(in.op) +
                               " is not supported: the machine computes on 32-bit words" +
                               (bits == 1 ? " (predicates: and/or/xor/not/select/icmp/zext/sext only)" : ""));
  }

  static bool narrow(int bits) { return bits == 8 || bits == 16; }
  // A narrow value (low `bits` of a word) made whole: sign- or zero-extended to 32 bits.
  MOp widen(MOp v, int bits, bool sign) {
    if (!narrow(bits)) return v;
    const std::uint32_t sh = 32 - static_cast<std::uint32_t>(bits);
    if (sign) return calc(Op::kSra, calc(Op::kShl, v, imm(sh)), imm(sh));
    return calc(Op::kAnd, v, imm((1u << bits) - 1));
  }

  Status select_one(const sdk::Instr& in) {
    const bool wide_shift = (in.op == Opcode::kLShr || in.op == Opcode::kAShr) && bits_of(in.type) == 64;
    if (in.result != 0 && (wide_[in.result] || wide_shift)) return select_wide(in);
    const IrType t = in.type;
    auto operand = [&](std::size_t i) { return value(in, in.operands[i]); };
    auto set = [&](LVal v) {
      if (in.result != 0) val_[in.result] = v;
    };
    auto set_reg = [&](int vreg) { set(reg_val(vreg)); };
    auto pure_dead = [&]() { return in.result != 0 && uses_[in.result].empty(); };

    switch (in.op) {
      case Opcode::kConst: {
        std::uint32_t v = static_cast<std::uint32_t>(in.imm);
        if (bits_of(t) == 1) v &= 1;
        if (narrow(bits_of(t))) v &= (1u << bits_of(t)) - 1;
        set(const_val(v));
        return {};
      }
      case Opcode::kParam: {
        if (in.imm < 0 || static_cast<std::size_t>(in.imm) >= k_.params.size())
          return err_at(in, ErrorCode::kInvalidArgument,
                        "param #" + std::to_string(in.imm) + " but the kernel has " + std::to_string(k_.params.size()));
        set(const_val(0, static_cast<int>(in.imm)));
        return {};
      }
      case Opcode::kSharedAddr: {
        if (in.imm < 0 || static_cast<std::size_t>(in.imm) >= shared_off_.size())
          return err_at(in, ErrorCode::kInvalidArgument,
                        "shared variable #" + std::to_string(in.imm) + " does not exist");
        set(const_val(static_cast<std::uint32_t>(shared_off_[in.imm])));
        return {};
      }
      case Opcode::kSpecial: {
        using SR = sdk::SpecialReg;
        LVal l;
        l.k = VK::kSpecial;
        switch (in.special) {
          case SR::kTidX: l.sp = Special::kTid; break;
          case SR::kNtidX: l.sp = Special::kNtid; break;
          case SR::kCtaidX: l.sp = Special::kCtaid; break;
          case SR::kNctaidX: l.sp = Special::kNctaid; break;
          case SR::kLaneId: l.sp = Special::kLaneId; break;
          case SR::kTidY:
          case SR::kTidZ:
          case SR::kCtaidY:
          case SR::kCtaidZ: l = const_val(0); break;
          case SR::kNtidY:
          case SR::kNtidZ:
          case SR::kNctaidY:
          case SR::kNctaidZ: l = const_val(1); break;
          case SR::kWarpSize: l = const_val(32); break;  // CUDA's value; width-dependent code is checked at shfl/vote
        }
        set(l);
        return {};
      }
      case Opcode::kAdd:
      case Opcode::kSub: {
        QGPU_RETURN_IF_ERROR(need(in, 2));
        QGPU_RETURN_IF_ERROR(need_word(in, t, true, true, true));
        if (pure_dead()) return {};
        auto x = operand(0);
        if (!x) return x.error();
        auto y = operand(1);
        if (!y) return y.error();
        LVal& a = **x;
        LVal& b = **y;
        const bool sub = in.op == Opcode::kSub;
        if (bits_of(t) == 1) {  // i1: add and sub are xor
          set(from(calc(Op::kXor, resolve(a), resolve(b))));
          return {};
        }
        // Constant folding, including launch constants plus an offset.
        if (a.k == VK::kConst && b.k == VK::kConst && (b.reloc < 0 || (!sub && a.reloc < 0))) {
          const int reloc = a.reloc >= 0 ? a.reloc : b.reloc;
          set(const_val(sub ? a.imm - b.imm : a.imm + b.imm, reloc));
          return {};
        }
        // mul feeding this add: mad.
        if (!sub && (a.k == VK::kMulPending || b.k == VK::kMulPending)) {
          LVal& m = a.k == VK::kMulPending ? a : b;
          LVal& o = a.k == VK::kMulPending ? b : a;
          if (o.k != VK::kConst) {
            const MOp c = resolve(o);
            set(from(mad(m.ma, m.mb, c)));
            m = LVal{};
            return {};
          }
        }
        // reg + constant used only as addresses: fold into the memory offset.
        const bool b_const = b.k == VK::kConst, a_const = !sub && a.k == VK::kConst;
        if ((b_const || a_const) && addr_only(in.result)) {
          LVal& base = b_const ? a : b;
          const LVal& off = b_const ? b : a;
          if (!(sub && off.reloc >= 0)) {
            const std::uint32_t delta = sub ? 0u - off.imm : off.imm;
            if (base.k == VK::kRegOff && (base.reloc < 0 || off.reloc < 0)) {
              LVal r = base;
              r.imm += delta;
              if (r.reloc < 0) r.reloc = off.reloc;
              set(r);
              return {};
            }
            if (base.k != VK::kRegOff) {
              const MOp bm = as_reg(resolve(base));
              if (bm.k == MOp::K::kVReg) {
                LVal r;
                r.k = VK::kRegOff;
                r.vreg = bm.vreg;
                r.imm = delta;
                r.reloc = off.reloc;
                set(r);
                return {};
              }
            }
          }
        }
        set_reg(alu(sub ? Op::kSub : Op::kAdd, resolve(a), resolve(b)));
        return {};
      }
      case Opcode::kMul: {
        QGPU_RETURN_IF_ERROR(need(in, 2));
        QGPU_RETURN_IF_ERROR(need_word(in, t, true, false, true));
        if (pure_dead()) return {};
        auto x = operand(0);
        if (!x) return x.error();
        auto y = operand(1);
        if (!y) return y.error();
        MOp a = resolve(**x), b = resolve(**y);
        if (a.is_plain_imm() && b.is_plain_imm()) {
          set(const_val(a.imm * b.imm));
          return {};
        }
        if (mad_candidate(in)) {
          LVal l;
          l.k = VK::kMulPending;
          l.ma = a;
          l.mb = b;
          set(l);
          return {};
        }
        set_reg(emit_mul(a, b));
        return {};
      }
      case Opcode::kAnd:
      case Opcode::kOr:
      case Opcode::kXor:
      case Opcode::kShl:
      case Opcode::kLShr:
      case Opcode::kAShr:
      case Opcode::kSMin:
      case Opcode::kSMax:
      case Opcode::kUMin:
      case Opcode::kUMax: {
        QGPU_RETURN_IF_ERROR(need(in, 2));
        const bool logic = in.op == Opcode::kAnd || in.op == Opcode::kOr || in.op == Opcode::kXor;
        QGPU_RETURN_IF_ERROR(need_word(in, t, logic || in.op == Opcode::kShl, logic, true));
        if (pure_dead()) return {};
        static const std::pair<Opcode, Op> kMap[] = {
            {Opcode::kAnd, Op::kAnd},   {Opcode::kOr, Op::kOr},    {Opcode::kXor, Op::kXor},  {Opcode::kShl, Op::kShl},
            {Opcode::kLShr, Op::kShr},  {Opcode::kAShr, Op::kSra}, {Opcode::kSMin, Op::kMin}, {Opcode::kSMax, Op::kMax},
            {Opcode::kUMin, Op::kMinU}, {Opcode::kUMax, Op::kMaxU}};
        Op op = Op::kNop;
        for (auto [from_op, to_op] : kMap)
          if (from_op == in.op) op = to_op;
        auto x = operand(0);
        if (!x) return x.error();
        auto y = operand(1);
        if (!y) return y.error();
        MOp a = resolve(**x), b = resolve(**y);
        if (narrow(bits_of(t)) && !logic) {  // whole values where the high bits matter
          const bool sign = in.op == Opcode::kAShr || in.op == Opcode::kSMin || in.op == Opcode::kSMax;
          if (in.op != Opcode::kShl) a = widen(a, bits_of(t), sign);
          b = widen(b, bits_of(t), in.op == Opcode::kSMin || in.op == Opcode::kSMax);
        }
        if (in.op == Opcode::kShl && bits_of(t) == 64 && b.is_plain_imm() && b.imm >= 32 && b.imm < 64)
          b = imm(32);  // i64 shl by 32..63: low 32 bits are 0
        set(from(calc(op, a, b)));
        return {};
      }
      case Opcode::kNot:
      case Opcode::kNeg:
      case Opcode::kAbs: {
        QGPU_RETURN_IF_ERROR(need(in, 1));
        QGPU_RETURN_IF_ERROR(need_word(in, t, in.op != Opcode::kAbs, in.op == Opcode::kNot, true));
        if (pure_dead()) return {};
        auto x = operand(0);
        if (!x) return x.error();
        MOp a = resolve(**x);
        if (in.op == Opcode::kAbs) a = widen(a, bits_of(t), true);
        if (in.op == Opcode::kNot)
          set(from(bits_of(t) == 1 ? calc(Op::kXor, a, imm(1)) : calc(Op::kNot, a)));
        else if (in.op == Opcode::kNeg)
          set(from(calc(Op::kSub, MOp::imm_of(0), a)));
        else
          set(from(abs_of(a)));
        return {};
      }
      case Opcode::kMulHiS:
      case Opcode::kMulHiU:
      case Opcode::kSDiv:
      case Opcode::kUDiv:
      case Opcode::kSRem:
      case Opcode::kURem: {
        QGPU_RETURN_IF_ERROR(need(in, 2));
        QGPU_RETURN_IF_ERROR(need_word(in, t, false));
        if (pure_dead()) return {};
        auto x = operand(0);
        if (!x) return x.error();
        auto y = operand(1);
        if (!y) return y.error();
        MOp a = resolve(**x), b = resolve(**y);
        switch (in.op) {
          case Opcode::kMulHiU: set(from(mulhi_u(a, b))); break;
          case Opcode::kMulHiS: set(from(mulhi_s(a, b))); break;
          case Opcode::kUDiv: set(from(udivrem(a, b).first)); break;
          case Opcode::kURem: set(from(udivrem(a, b).second)); break;
          case Opcode::kSDiv: set(from(sdivrem(a, b, true))); break;
          default: set(from(sdivrem(a, b, false))); break;
        }
        return {};
      }
      case Opcode::kPopc:
      case Opcode::kClz:
      case Opcode::kBrev: {
        QGPU_RETURN_IF_ERROR(need(in, 1));
        QGPU_RETURN_IF_ERROR(need_word(in, type(in.operands[0]), false));
        if (pure_dead()) return {};
        auto x = operand(0);
        if (!x) return x.error();
        MOp a = resolve(**x);
        set(from(in.op == Opcode::kPopc ? popc(a) : in.op == Opcode::kClz ? clz(a) : brev(a)));
        return {};
      }
      case Opcode::kICmp: {
        QGPU_RETURN_IF_ERROR(need(in, 2));
        QGPU_RETURN_IF_ERROR(need_word(in, type(in.operands[0]), true, true, true));
        if (pure_dead()) return {};
        auto x = operand(0);
        if (!x) return x.error();
        auto y = operand(1);
        if (!y) return y.error();
        using P = sdk::CmpPred;
        const int ob = bits_of(type(in.operands[0]));
        const bool sign = !(in.pred == P::kUlt || in.pred == P::kUle || in.pred == P::kUgt || in.pred == P::kUge);
        static const std::pair<P, Op> kMap[] = {{P::kEq, Op::kSetEq},   {P::kNe, Op::kSetNe},   {P::kSlt, Op::kSetLt},
                                                {P::kSle, Op::kSetLe},  {P::kSgt, Op::kSetGt},  {P::kSge, Op::kSetGe},
                                                {P::kUlt, Op::kSetLtU}, {P::kUle, Op::kSetLeU}, {P::kUgt, Op::kSetGtU},
                                                {P::kUge, Op::kSetGeU}};
        Op op = Op::kSetEq;
        for (auto [p, o] : kMap)
          if (p == in.pred) op = o;
        set(from(calc(op, widen(resolve(**x), ob, sign), widen(resolve(**y), ob, sign))));
        return {};
      }
      case Opcode::kSelect: {
        QGPU_RETURN_IF_ERROR(need(in, 3));
        QGPU_RETURN_IF_ERROR(need_word(in, t, true, true, true));
        if (pure_dead()) return {};
        auto c = operand(0);
        if (!c) return c.error();
        auto x = operand(1);
        if (!x) return x.error();
        auto y = operand(2);
        if (!y) return y.error();
        MOp cm = resolve(**c);
        if (cm.is_plain_imm()) {
          set(cm.imm ? **x : **y);
          return {};
        }
        MOp a = resolve(**x), b = resolve(**y);
        set_reg(alu(Op::kSel, a, b, as_reg(cm)));
        return {};
      }
      case Opcode::kZExt:
      case Opcode::kSExt:
      case Opcode::kTrunc: {
        QGPU_RETURN_IF_ERROR(need(in, 1));
        const int from_bits = bits_of(type(in.operands[0])), to_bits = bits_of(t);
        if (from_bits == 0 || to_bits == 0)
          return unsupported(
              in, op_str(in.op) + " " + type_str(type(in.operands[0])) + " to " + type_str(t) + " is not supported");
        if (pure_dead()) return {};
        auto x = operand(0);
        if (!x) return x.error();
        LVal& a = **x;
        if (is_alias_op(in) || from_bits == to_bits) {
          set(a);
          return {};
        }
        if (in.op == Opcode::kTrunc) {
          // Keep the low bits; an i1 must be exactly 0 or 1.
          if (to_bits == 1)
            set(from(calc(Op::kAnd, resolve(a), imm(1))));
          else
            set(a);
          return {};
        }
        if (from_bits == 1) {  // zext keeps 0/1; sext gives 0 or all ones
          set(in.op == Opcode::kZExt ? a : from(calc(Op::kSub, MOp::imm_of(0), resolve(a))));
          return {};
        }
        set(from(widen(resolve(a), from_bits, in.op == Opcode::kSExt)));
        return {};
      }
      case Opcode::kLoad:
      case Opcode::kStore:
      case Opcode::kAtomic: return select_memory(in);
      case Opcode::kShfl:
      case Opcode::kShflPred: return select_shfl(in);
      case Opcode::kVote: return select_vote(in);
      case Opcode::kBarrier: {
        const int next = chain_block("sync");
        mb_[cur_].term = MTerm{Op::kBar, -1, next, -1, in.loc};
        cur_ = next;
        return {};
      }
      case Opcode::kRet: mb_[cur_].term = MTerm{Op::kExit, -1, -1, -1, in.loc}; return {};
      case Opcode::kBr: {
        QGPU_RETURN_IF_ERROR(copies_into(in, in.targets[0], cur_));
        mb_[cur_].term = MTerm{Op::kBr, -1, chain_[in.targets[0].block][0], -1, in.loc};
        return {};
      }
      case Opcode::kCondBr: {
        QGPU_RETURN_IF_ERROR(need(in, 1));
        auto c = operand(0);
        if (!c) return c.error();
        MOp cm = resolve(**c);
        if (cm.is_plain_imm()) {
          const sdk::BranchTarget& tgt = in.targets[cm.imm ? 0 : 1];
          QGPU_RETURN_IF_ERROR(copies_into(in, tgt, cur_));
          mb_[cur_].term = MTerm{Op::kBr, -1, chain_[tgt.block][0], -1, in.loc};
          return {};
        }
        const MOp cond = as_reg(cm);
        int dest[2];
        for (int i = 0; i < 2; ++i) {
          const sdk::BranchTarget& tgt = in.targets[i];
          dest[i] = chain_[tgt.block][0];
          if (has_live_args(tgt)) {
            // Copies on this edge only: a block of its own, placed just before its target.
            const int edge = new_block("edge." + label(cur_ir_) + "." + label(tgt.block));
            edge_before_[tgt.block].push_back(edge);
            const int saved = cur_;
            cur_ = edge;
            QGPU_RETURN_IF_ERROR(copies_into(in, tgt, edge));
            mb_[edge].term = MTerm{Op::kBr, -1, dest[i], -1, in.loc};
            cur_ = saved;
            dest[i] = edge;
          }
        }
        mb_[cur_].term = MTerm{Op::kBrc, cond.k == MOp::K::kZero ? -2 : cond.vreg, dest[0], dest[1], in.loc};
        return {};
      }
    }
    return unsupported(in, "opcode " + op_str(in.op) + " is not supported by machine_simt");
  }

  // ---------------------------------------------------------------- 64-bit values with a high word
  // Most i64 values are addresses and live as their low word. Where a high word is observed (a right
  // shift of an i64, e.g. clang's closed forms of loop sums: (a * b) >> 1 in 64 bits), the value and
  // everything it is computed from carry a second register: the high word.
  void compute_wide() {
    const std::size_t n = k_.value_types.size();
    wide_.assign(n, false);
    hi_.assign(n, MOp{});
    std::map<ValueId, std::pair<std::size_t, std::size_t>> arg_of;
    for (std::size_t b = 0; b < k_.blocks.size(); ++b)
      for (std::size_t i = 0; i < k_.blocks[b].args.size(); ++i) arg_of[k_.blocks[b].args[i]] = {b, i};
    std::vector<ValueId> work;
    auto mark = [&](ValueId v) {
      if (bits_of(type(v)) == 64 && !wide_[v]) wide_[v] = true, work.push_back(v);
    };
    for (std::size_t b = 0; b < k_.blocks.size(); ++b) {
      if (!reachable_[b]) continue;
      for (const sdk::Instr& in : k_.blocks[b].instrs)
        if ((in.op == Opcode::kLShr || in.op == Opcode::kAShr) && bits_of(in.type) == 64 && !in.operands.empty())
          mark(in.operands[0]);
    }
    while (!work.empty()) {
      const ValueId v = work.back();
      work.pop_back();
      if (const sdk::Instr* d = def_[v]) {
        switch (d->op) {
          case Opcode::kAdd:
          case Opcode::kSub:
          case Opcode::kMul:
          case Opcode::kAnd:
          case Opcode::kOr:
          case Opcode::kXor:
          case Opcode::kNot:
          case Opcode::kNeg:
            for (ValueId o : d->operands) mark(o);
            break;
          case Opcode::kShl:
          case Opcode::kLShr:
          case Opcode::kAShr:
            if (!d->operands.empty()) mark(d->operands[0]);
            break;
          case Opcode::kSelect:
            for (std::size_t i = 1; i < d->operands.size(); ++i) mark(d->operands[i]);
            break;
          default: break;
        }
      } else if (auto it = arg_of.find(v); it != arg_of.end()) {
        const auto [blk, idx] = it->second;
        for (std::size_t b = 0; b < k_.blocks.size(); ++b) {
          if (!reachable_[b]) continue;
          for (const auto& t : k_.blocks[b].instrs.back().targets)
            if (t.block == blk && idx < t.args.size()) mark(t.args[idx]);
        }
      }
    }
  }

  Status select_wide(const sdk::Instr& in) {
    auto lo_of = [&](std::size_t i) -> sdk::Expected<MOp> {
      auto v = value(in, in.operands[i]);
      if (!v) return v.error();
      return resolve(**v);
    };
    auto hi_of = [&](std::size_t i) -> sdk::Expected<MOp> {
      const MOp h = hi_[in.operands[i]];
      if (h.k == MOp::K::kNone)
        return err_at(in, ErrorCode::kInternal, "no high word for %" + std::to_string(in.operands[i]));
      return h;
    };
    auto done = [&](MOp lo, MOp hi) {
      val_[in.result] = from(lo);
      hi_[in.result] = hi;
      return Status{};
    };
    switch (in.op) {
      case Opcode::kConst: {
        const auto v = static_cast<std::uint64_t>(in.imm);
        return done(imm(static_cast<std::uint32_t>(v)), imm(static_cast<std::uint32_t>(v >> 32)));
      }
      case Opcode::kParam: {
        if (in.imm < 0 || static_cast<std::size_t>(in.imm) >= k_.params.size())
          return err_at(in, ErrorCode::kInvalidArgument, "param #" + std::to_string(in.imm) + " does not exist");
        const MOp lo = MOp::imm_of(0, static_cast<int>(in.imm));
        const bool ptr = k_.params[in.imm].kind == sdk::KernelParam::Kind::kPointer;
        return done(lo, ptr ? imm(0) : calc(Op::kSra, lo, imm(31)));  // scalars are int32 launch values
      }
      case Opcode::kZExt:
      case Opcode::kSExt: {
        QGPU_RETURN_IF_ERROR(need(in, 1));
        const int from_bits = bits_of(type(in.operands[0]));
        auto a = lo_of(0);
        if (!a) return a.error();
        if (from_bits == 64) {
          auto h = hi_of(0);
          if (!h) return h.error();
          return done(*a, *h);
        }
        const bool sign = in.op == Opcode::kSExt;
        MOp lo = from_bits == 1 ? (sign ? calc(Op::kSub, imm(0), *a) : *a) : widen(*a, from_bits, sign);
        return done(lo, sign ? calc(Op::kSra, lo, imm(31)) : imm(0));
      }
      case Opcode::kAdd:
      case Opcode::kSub:
      case Opcode::kMul:
      case Opcode::kAnd:
      case Opcode::kOr:
      case Opcode::kXor: {
        QGPU_RETURN_IF_ERROR(need(in, 2));
        auto al = lo_of(0), bl = lo_of(1), ah = hi_of(0), bh = hi_of(1);
        for (auto* e : {&al, &bl, &ah, &bh})
          if (!*e) return e->error();
        switch (in.op) {
          case Opcode::kAdd: {
            const MOp lo = calc(Op::kAdd, *al, *bl);
            const MOp carry = calc(Op::kSetLtU, lo, *al);
            return done(lo, calc(Op::kAdd, calc(Op::kAdd, *ah, *bh), carry));
          }
          case Opcode::kSub: {
            const MOp borrow = calc(Op::kSetLtU, *al, *bl);
            const MOp lo = calc(Op::kSub, *al, *bl);
            return done(lo, calc(Op::kSub, calc(Op::kSub, *ah, *bh), borrow));
          }
          case Opcode::kMul: {
            // (ah:al) * (bh:bl) mod 2^64 = al*bl + ((mulhi(al, bl) + al*bh + ah*bl) << 32)
            const MOp hi =
                calc(Op::kAdd, mulhi_u(*al, *bl), calc(Op::kAdd, calc(Op::kMul, *al, *bh), calc(Op::kMul, *ah, *bl)));
            return done(calc(Op::kMul, *al, *bl), hi);
          }
          default: {
            const Op op = in.op == Opcode::kAnd ? Op::kAnd : in.op == Opcode::kOr ? Op::kOr : Op::kXor;
            return done(calc(op, *al, *bl), calc(op, *ah, *bh));
          }
        }
      }
      case Opcode::kNot:
      case Opcode::kNeg: {
        QGPU_RETURN_IF_ERROR(need(in, 1));
        auto al = lo_of(0), ah = hi_of(0);
        if (!al) return al.error();
        if (!ah) return ah.error();
        if (in.op == Opcode::kNot) return done(calc(Op::kNot, *al), calc(Op::kNot, *ah));
        const MOp borrow = calc(Op::kSetNe, *al, imm(0));
        return done(calc(Op::kSub, imm(0), *al), calc(Op::kSub, calc(Op::kSub, imm(0), *ah), borrow));
      }
      case Opcode::kShl:
      case Opcode::kLShr:
      case Opcode::kAShr: {
        QGPU_RETURN_IF_ERROR(need(in, 2));
        auto al = lo_of(0), ah = hi_of(0), amount = lo_of(1);
        for (auto* e : {&al, &ah, &amount})
          if (!*e) return e->error();
        if (!amount->is_plain_imm())
          return unsupported(in,
                             "i64 " + op_str(in.op) + " by a variable amount is not supported (constant amounts are)");
        const std::uint32_t k = amount->imm;
        const MOp l = *al, h = *ah;
        if (in.op == Opcode::kShl) {
          if (k >= 64) return done(imm(0), imm(0));
          if (k >= 32) return done(imm(0), calc(Op::kShl, l, imm(k - 32)));
          if (k == 0) return done(l, h);
          return done(calc(Op::kShl, l, imm(k)),
                      calc(Op::kOr, calc(Op::kShl, h, imm(k)), calc(Op::kShr, l, imm(32 - k))));
        }
        const bool arith = in.op == Opcode::kAShr;
        const Op down = arith ? Op::kSra : Op::kShr;
        const MOp fill = arith ? calc(Op::kSra, h, imm(31)) : imm(0);
        if (k >= 64) return done(fill, fill);
        if (k >= 32) return done(calc(down, h, imm(k - 32)), fill);
        if (k == 0) return done(l, h);
        return done(calc(Op::kOr, calc(Op::kShr, l, imm(k)), calc(Op::kShl, h, imm(32 - k))), calc(down, h, imm(k)));
      }
      case Opcode::kSelect: {
        QGPU_RETURN_IF_ERROR(need(in, 3));
        auto c = lo_of(0), al = lo_of(1), bl = lo_of(2), ah = hi_of(1), bh = hi_of(2);
        for (auto* e : {&c, &al, &bl, &ah, &bh})
          if (!*e) return e->error();
        if (c->is_plain_imm()) return c->imm ? done(*al, *ah) : done(*bl, *bh);
        const MOp cr = as_reg(*c);
        return done(MOp::reg(alu(Op::kSel, *al, *bl, cr)), MOp::reg(alu(Op::kSel, *ah, *bh, cr)));
      }
      default: break;
    }
    return unsupported(
        in, "i64 " + op_str(in.op) + " whose high 32 bits are used (by a 64-bit right shift) is not supported");
  }

  bool mad_candidate(const sdk::Instr& in) const {
    if (in.result == 0 || uses_[in.result].size() != 1) return false;
    const Use& u = uses_[in.result][0];
    if (u.index < 0 || u.user->op != Opcode::kAdd || bits_of(u.user->type) == 1) return false;
    auto a = block_of_.find(u.user), b = block_of_.find(&in);
    if (a == block_of_.end() || b == block_of_.end() || a->second != b->second) return false;
    const ValueId other = u.user->operands[1 - u.index];
    return !const_def(other) && other != in.result;
  }

  bool has_live_args(const sdk::BranchTarget& t) const {
    for (ValueId a : k_.blocks[t.block].args)
      if (!dead_arg_.count(a)) return true;
    return false;
  }

  Status copies_into(const sdk::Instr& in, const sdk::BranchTarget& t, int block) {
    MInst pc;
    pc.pcopy = true;
    for (std::size_t i = 0; i < t.args.size(); ++i) {
      const ValueId dst = k_.blocks[t.block].args[i];
      if (dead_arg_.count(dst)) continue;
      auto v = value(in, t.args[i]);
      if (!v) return v.error();
      MOp src = resolve(**v);
      if (src.k == MOp::K::kVReg && src.vreg == val_[dst].vreg && !wide_[dst]) continue;
      pc.copies.emplace_back(val_[dst].vreg, src);
      if (wide_[dst]) {
        if (hi_[t.args[i]].k == MOp::K::kNone)
          return err_at(in, ErrorCode::kInternal, "no high word for %" + std::to_string(t.args[i]));
        pc.copies.emplace_back(hi_[dst].vreg, hi_[t.args[i]]);
      }
    }
    if (!pc.copies.empty()) {
      const int saved = cur_;
      cur_ = block;
      push(std::move(pc));
      cur_ = saved;
    }
    return {};
  }

  // ---------------------------------------------------------------- expansions (docs/ISA.md "Expansions")
  MOp abs_of(MOp a) {
    const MOp s = calc(Op::kSra, a, imm(31));
    return calc(Op::kSub, calc(Op::kXor, a, s), s);
  }

  // High word of the unsigned 64-bit product from 16-bit halves, every partial sum below 2^32
  // (Hacker's Delight mulhu): 11 instructions (13 without a constant operand).
  MOp mulhi_u(MOp a, MOp b) {
    if (a.is_plain_imm()) std::swap(a, b);
    // Ordered so that each half dies as soon as possible (register pressure).
    const MOp al = calc(Op::kAnd, a, imm(0xffff)), bl = calc(Op::kAnd, b, imm(0xffff));
    const MOp s0 = calc(Op::kShr, calc(Op::kMul, al, bl), imm(16));
    const MOp ah = calc(Op::kShr, a, imm(16));
    const MOp t1 = mad(ah, bl, s0);
    const MOp bh = calc(Op::kShr, b, imm(16));
    const MOp t2 = mad(al, bh, calc(Op::kAnd, t1, imm(0xffff)));
    const MOp hi = mad(ah, bh, calc(Op::kShr, t1, imm(16)));
    return calc(Op::kAdd, hi, calc(Op::kShr, t2, imm(16)));
  }

  // a * b + c, folded where the operands allow.
  MOp mad(MOp a, MOp b, MOp c) {
    if (a.is_plain_imm() && b.is_plain_imm()) return calc(Op::kAdd, imm(a.imm * b.imm), c);
    if ((a.is_plain_imm() && a.imm == 0) || (b.is_plain_imm() && b.imm == 0)) return c;
    if (c.is_plain_imm() && c.imm == 0) return calc(Op::kMul, a, b);
    if (a.is_plain_imm() && a.imm == 1) return calc(Op::kAdd, b, c);
    if (b.is_plain_imm() && b.imm == 1) return calc(Op::kAdd, a, c);
    return MOp::reg(alu(Op::kMad, a, b, as_reg(c)));
  }

  // Signed from unsigned: hi_s = hi_u - (a < 0 ? b : 0) - (b < 0 ? a : 0).
  MOp mulhi_s(MOp a, MOp b) {
    MOp hi = mulhi_u(a, b);
    hi = calc(Op::kSub, hi, calc(Op::kAnd, calc(Op::kSra, a, imm(31)), b));
    return calc(Op::kSub, hi, calc(Op::kAnd, calc(Op::kSra, b, imm(31)), a));
  }

  // Restoring shift-subtract division, 32 iterations of one loop (3 blocks).
  // x / 0 gives 0xffffffff and x % 0 gives x.
  std::pair<MOp, MOp> udivrem(MOp n, MOp d) {
    if (n.is_plain_imm() && d.is_plain_imm())
      return {imm(d.imm ? n.imm / d.imm : 0xffffffffu), imm(d.imm ? n.imm % d.imm : n.imm)};
    if (d.k == MOp::K::kSpecial || (d.k == MOp::K::kImm && d.reloc >= 0)) d = MOp::reg(alu(Op::kMov, d));
    const int q = alu(Op::kMov, imm(0)), r = alu(Op::kMov, imm(0));
    const int nn = alu(Op::kMov, n), i = alu(Op::kMov, imm(32));
    const int loop = chain_block("div"), cont = chain_block("div.end");
    mb_[cur_].term = MTerm{Op::kBr, -1, loop, -1, loc_};
    cur_ = loop;
    const int top = alu(Op::kShr, MOp::reg(nn), imm(31));
    alu_to(r, Op::kShl, MOp::reg(r), imm(1));
    alu_to(r, Op::kOr, MOp::reg(r), MOp::reg(top));
    alu_to(nn, Op::kShl, MOp::reg(nn), imm(1));
    const int ge = alu(Op::kSetGeU, MOp::reg(r), d);
    const int diff = alu(Op::kSub, MOp::reg(r), d);
    alu_to(r, Op::kSel, MOp::reg(diff), MOp::reg(r), MOp::reg(ge));
    alu_to(q, Op::kShl, MOp::reg(q), imm(1));
    alu_to(q, Op::kOr, MOp::reg(q), MOp::reg(ge));
    alu_to(i, Op::kSub, MOp::reg(i), imm(1));
    mb_[cur_].term = MTerm{Op::kBrc, i, loop, cont, loc_};
    cur_ = cont;
    // Fresh names, so later uses never see the loop's redefinitions as SSA values.
    return {MOp::reg(alu(Op::kMov, MOp::reg(q))), MOp::reg(alu(Op::kMov, MOp::reg(r)))};
  }

  // Signed division on magnitudes; the quotient takes sign(a)^sign(b), the remainder sign(a).
  MOp sdivrem(MOp a, MOp b, bool quotient) {
    if (a.is_plain_imm() && b.is_plain_imm() && b.imm != 0 && !(a.imm == 0x80000000u && b.imm == 0xffffffffu))
      return imm(quotient ? u32(static_cast<std::int64_t>(s32(a.imm) / s32(b.imm)))
                          : u32(static_cast<std::int64_t>(s32(a.imm) % s32(b.imm))));
    const MOp sa = calc(Op::kSra, a, imm(31)), sb = calc(Op::kSra, b, imm(31));
    const MOp ua = calc(Op::kSub, calc(Op::kXor, a, sa), sa), ub = calc(Op::kSub, calc(Op::kXor, b, sb), sb);
    auto [q, r] = udivrem(ua, ub);
    if (quotient) {
      const MOp s = calc(Op::kXor, sa, sb);
      return calc(Op::kSub, calc(Op::kXor, q, s), s);
    }
    return calc(Op::kSub, calc(Op::kXor, r, sa), sa);
  }

  MOp popc(MOp x) {
    x = calc(Op::kSub, x, calc(Op::kAnd, calc(Op::kShr, x, imm(1)), imm(0x55555555)));
    x = calc(Op::kAdd, calc(Op::kAnd, x, imm(0x33333333)), calc(Op::kAnd, calc(Op::kShr, x, imm(2)), imm(0x33333333)));
    x = calc(Op::kAnd, calc(Op::kAdd, x, calc(Op::kShr, x, imm(4))), imm(0x0f0f0f0f));
    return calc(Op::kShr, calc(Op::kMul, x, imm(0x01010101)), imm(24));
  }

  // Binary search: shift the value left while its top 16/8/4/2/1 bits are zero.
  MOp clz(MOp x) {
    MOp v = x, n = imm(0);
    const std::pair<std::uint32_t, std::uint32_t> steps[] = {
        {0x10000u, 4}, {0x1000000u, 3}, {0x10000000u, 2}, {0x40000000u, 1}};
    for (auto [below, log_shift] : steps) {
      const MOp s = calc(Op::kShl, calc(Op::kSetLtU, v, imm(below)), imm(log_shift));
      v = calc(Op::kShl, v, s);
      n = calc(Op::kAdd, n, s);
    }
    n = calc(Op::kAdd, n, calc(Op::kSetLtU, v, imm(0x80000000u)));
    return calc(Op::kAdd, n, calc(Op::kSetEq, x, imm(0)));
  }

  MOp brev(MOp x) {
    const std::pair<std::uint32_t, std::uint32_t> steps[] = {
        {0x55555555u, 1}, {0x33333333u, 2}, {0x0f0f0f0fu, 4}, {0x00ff00ffu, 8}};
    for (auto [mask, s] : steps)
      x = calc(Op::kOr, calc(Op::kAnd, calc(Op::kShr, x, imm(s)), imm(mask)),
               calc(Op::kShl, calc(Op::kAnd, x, imm(mask)), imm(s)));
    return calc(Op::kOr, calc(Op::kShr, x, imm(16)), calc(Op::kShl, x, imm(16)));
  }

  // ---------------------------------------------------------------- memory, shuffles, votes
  Status select_memory(const sdk::Instr& in) {
    const bool load = in.op == Opcode::kLoad, store = in.op == Opcode::kStore;
    const bool cas = in.op == Opcode::kAtomic && in.atomic == sdk::AtomicOp::kCas;
    QGPU_RETURN_IF_ERROR(need(in, load ? 1 : store ? 2 : cas ? 3 : 2));
    const IrType access = store ? type(in.operands[1]) : in.type;
    if (bits_of(access) != 32)
      return unsupported(in,
                         type_str(access) + " " + op_str(in.op) +
                             " is not supported: memory holds 32-bit words and the machine accesses whole words only");
    bool shared = in.space == sdk::AddressSpace::kShared;
    if (in.space == sdk::AddressSpace::kGeneric) {
      const Origin o = origin_[in.operands[0]];
      if (o != Origin::kGlobal && o != Origin::kShared)
        return unsupported(
            in, "generic " + op_str(in.op) + ": cannot tell whether the address points to global or shared memory");
      shared = o == Origin::kShared;
    }
    if (load && pure_dead_result(in)) return {};
    auto addr = value(in, in.operands[0]);
    if (!addr) return addr.error();
    LVal& av = **addr;
    MInst mi;
    if (av.k == VK::kConst) {
      mi.a = MOp::zero();
      mi.imm = av.imm;
      mi.reloc = av.reloc;
    } else if (av.k == VK::kRegOff) {
      mi.a = MOp::reg(av.vreg);
      mi.imm = av.imm;
      mi.reloc = av.reloc;
    } else {
      mi.a = as_reg(resolve(av));
    }
    mi.flags = shared ? kFlagShared : 0;
    if (load) {
      mi.op = Op::kLd;
    } else if (store) {
      mi.op = Op::kSt;
      auto v = value(in, in.operands[1]);
      if (!v) return v.error();
      mi.b = as_reg(resolve(**v));
    } else {
      using A = sdk::AtomicOp;
      static const std::pair<A, Op> kMap[] = {
          {A::kAdd, Op::kAtomAdd},   {A::kSMin, Op::kAtomMin},  {A::kSMax, Op::kAtomMax}, {A::kUMin, Op::kAtomMinU},
          {A::kUMax, Op::kAtomMaxU}, {A::kExch, Op::kAtomExch}, {A::kAnd, Op::kAtomAnd},  {A::kOr, Op::kAtomOr},
          {A::kXor, Op::kAtomXor},   {A::kInc, Op::kAtomInc},   {A::kDec, Op::kAtomDec},  {A::kCas, Op::kAtomCas}};
      for (auto [a, o] : kMap)
        if (a == in.atomic) mi.op = o;
      auto v = value(in, in.operands[1]);
      if (!v) return v.error();
      mi.b = as_reg(resolve(**v));
      if (cas) {
        auto n = value(in, in.operands[2]);
        if (!n) return n.error();
        mi.c = as_reg(resolve(**n));
      }
    }
    if (in.result != 0 && !store) {
      mi.d = newv();
      val_[in.result] = reg_val(mi.d);
    }
    push(std::move(mi));
    return {};
  }

  bool pure_dead_result(const sdk::Instr& in) const { return in.result != 0 && uses_[in.result].empty(); }

  Status select_shfl(const sdk::Instr& in) {
    const sdk::Instr* sh = &in;
    if (in.op == Opcode::kShflPred) {
      QGPU_RETURN_IF_ERROR(need(in, 1));
      sh = def_[in.operands[0]];
      if (sh == nullptr || sh->op != Opcode::kShfl)
        return err_at(in, ErrorCode::kInvalidArgument, "shfl.pred operand is not the result of a shfl");
    }
    if (sh->operands.size() < 3)
      return err_at(
          in, ErrorCode::kInvalidArgument,
          "shfl has " + std::to_string(sh->operands.size()) + " operands, expected value, lane, c[, membermask]");
    QGPU_RETURN_IF_ERROR(need_word(*sh, sh->type, false));
    static const char* kModes[] = {"idx", "up", "down", "bfly"};
    const std::string name = std::string("shfl.") + kModes[static_cast<int>(sh->shfl)];
    auto cv = value(in, sh->operands[2]);
    if (!cv) return cv.error();
    if ((*cv)->k != VK::kConst || (*cv)->reloc >= 0)
      return unsupported(in, name + ": the packed clamp/width operand c must be a constant");
    const std::uint32_t c = (*cv)->imm;
    const std::uint32_t segmask = (c >> 8) & 0x1f, clamp = c & 0x1f;
    const std::uint32_t width = 32 - segmask;
    if (!std::has_single_bit(width) || ((32 - width) != segmask) || (c & ~0x1f1fu) != 0)
      return unsupported(in,
                         name + ": c operand 0x" + to_hex(c) + " is not a CUDA width (((32 - width) << 8) | clamp)");
    if (clamp != (sh->shfl == sdk::ShflMode::kUp ? 0u : 0x1fu))
      return unsupported(in,
                         name + ": clamp " + std::to_string(clamp) + " in c is not what CUDA's __shfl_*_sync emits");
    if (width > static_cast<std::uint32_t>(cfg_.lanes))
      return unsupported(in, name + " with width " + std::to_string(width) + " spans " + std::to_string(width) +
                                 " lanes, the machine's warps have " + std::to_string(cfg_.lanes) +
                                 " (pass a width of at most " + std::to_string(cfg_.lanes) +
                                 ", e.g. __shfl_down_sync(mask, v, d, " + std::to_string(cfg_.lanes) + "))");
    auto v = value(in, sh->operands[0]);
    if (!v) return v.error();
    auto lane = value(in, sh->operands[1]);
    if (!lane) return lane.error();
    MOp b = resolve(**lane);
    if (sh->shfl == sdk::ShflMode::kBfly && !(b.is_plain_imm() && b.imm < static_cast<std::uint32_t>(cfg_.lanes)))
      return unsupported(in, name + ": the lane mask must be a constant below " + std::to_string(cfg_.lanes) +
                                 " (a larger mask reaches another " + std::to_string(cfg_.lanes) + "-lane warp)");
    static const Op kOps[] = {Op::kShflIdx, Op::kShflUp, Op::kShflDown, Op::kShflBfly};
    MInst mi;
    mi.op = kOps[static_cast<int>(sh->shfl)];
    mi.a = as_reg(resolve(**v));
    mi.b = b;
    mi.flags = static_cast<std::uint8_t>(std::countr_zero(width) << kFlagWidthShift);
    if (in.op == Opcode::kShflPred) mi.flags |= kFlagPred;
    mi.d = newv();
    if (in.result != 0) val_[in.result] = reg_val(mi.d);
    push(std::move(mi));
    return {};
  }

  static std::string to_hex(std::uint32_t v) {
    static const char* kDigits = "0123456789abcdef";
    std::string s;
    do {
      s.insert(s.begin(), kDigits[v & 15]);
      v >>= 4;
    } while (v);
    return s;
  }

  Status select_vote(const sdk::Instr& in) {
    static const char* kModes[] = {"all", "any", "uni", "ballot"};
    const std::string name = std::string("vote.") + kModes[static_cast<int>(in.vote)];
    if (in.operands.empty()) return err_at(in, ErrorCode::kInvalidArgument, name + " has no operand");
    // With blocks of at most `lanes` threads every CUDA warp is one machine warp, so votes are exact.
    if (shape_.block > static_cast<std::uint32_t>(cfg_.lanes))
      return unsupported(in, name + " covers a 32-lane CUDA warp but the machine's warps have " +
                                 std::to_string(cfg_.lanes) + " lanes; it is exact only for thread blocks of at most " +
                                 std::to_string(cfg_.lanes) + " threads (this launch has " +
                                 std::to_string(shape_.block) + ")");
    auto p = value(in, in.operands[0]);
    if (!p) return p.error();
    const MOp pm = resolve(**p);
    const int ballot = alu(Op::kBallot, pm);
    MOp r = MOp::reg(ballot);
    if (in.vote == sdk::VoteMode::kAny) {
      r = MOp::reg(alu(Op::kSetNe, r, imm(0)));
    } else if (in.vote == sdk::VoteMode::kAll || in.vote == sdk::VoteMode::kUni) {
      const int active = alu(Op::kBallot, imm(1));
      const int all = alu(Op::kSetEq, r, MOp::reg(active));
      r = MOp::reg(all);
      if (in.vote == sdk::VoteMode::kUni)
        r = MOp::reg(alu(Op::kOr, r, MOp::reg(alu(Op::kSetEq, MOp::reg(ballot), imm(0)))));
    }
    if (in.result != 0) val_[in.result] = reg_val(r.vreg);
    return {};
  }

  // ---------------------------------------------------------------- register allocation and final blocks
  struct Pos {
    std::vector<int> defs, uses;
  };
  static Pos def_use(const MInst& mi) {
    Pos p;
    if (mi.pcopy) {
      for (const auto& [d, s] : mi.copies) {
        p.defs.push_back(d);
        if (s.k == MOp::K::kVReg) p.uses.push_back(s.vreg);
      }
      return p;
    }
    if (mi.d >= 0) p.defs.push_back(mi.d);
    for (const MOp* m : {&mi.a, &mi.b, &mi.c})
      if (m->k == MOp::K::kVReg) p.uses.push_back(m->vreg);
    return p;
  }

  sdk::Expected<std::unique_ptr<Program>> allocate_and_emit() {
    // Final order of machine blocks.
    std::vector<int> order;
    for (std::size_t b : order_) {
      for (int e : edge_before_[b]) order.push_back(e);
      for (int m : chain_[b]) order.push_back(m);
    }
    const int nb = static_cast<int>(mb_.size());
    std::vector<std::vector<int>> succ(nb);
    for (int m : order) {
      const MTerm& t = mb_[m].term;
      if (t.t >= 0) succ[m].push_back(t.t);
      if (t.f >= 0) succ[m].push_back(t.f);
    }
    const int n = nv_;
    std::vector<Bits> live_in(nb, Bits(n)), live_out(nb, Bits(n));
    auto transfer = [&](int m, Bits live, const std::function<void(const MInst*, const Pos&, const Bits&)>& at) {
      const MTerm& t = mb_[m].term;
      if (t.op == Op::kBrc && t.cond >= 0) live.set(t.cond);
      for (auto it = mb_[m].code.rbegin(); it != mb_[m].code.rend(); ++it) {
        const Pos p = def_use(*it);
        if (at) at(&*it, p, live);
        for (int d : p.defs) live.reset(d);
        for (int u : p.uses) live.set(u);
      }
      return live;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Bits out(n);
        for (int s : succ[*it]) out.merge(live_in[s]);
        live_out[*it] = out;
        changed |= live_in[*it].merge(transfer(*it, out, nullptr));
      }
    }
    // Interference graph and copy hints.
    std::vector<Bits> adj(n, Bits(n));
    std::vector<std::vector<int>> hints(n);
    int max_pressure = 0;
    std::string pressure_at;
    sdk::IrLoc pressure_loc;
    auto edge = [&](int a, int b) {
      if (a == b) return;
      adj[a].set(b);
      adj[b].set(a);
    };
    for (int m : order) {
      transfer(m, live_out[m], [&](const MInst* mi, const Pos& p, const Bits& live_after) {
        Bits across = live_after;
        for (int d : p.defs) across.set(d);
        if (across.count() > max_pressure) {
          max_pressure = across.count();
          pressure_at = mb_[m].label;
          pressure_loc = mi->loc;
        }
        for (int d : p.defs) {
          const int copy_src = (!mi->pcopy && mi->op == Op::kMov && mi->a.k == MOp::K::kVReg) ? mi->a.vreg : -1;
          live_after.each([&](std::size_t l) {
            if (static_cast<int>(l) != copy_src) edge(d, static_cast<int>(l));
          });
          for (int d2 : p.defs) edge(d, d2);
          if (copy_src >= 0) hints[d].push_back(copy_src), hints[copy_src].push_back(d);
        }
        if (mi->pcopy)
          for (const auto& [d, s] : mi->copies)
            if (s.k == MOp::K::kVReg) hints[d].push_back(s.vreg), hints[s.vreg].push_back(d);
      });
    }
    // Greedy colouring in order of first definition.
    std::vector<int> first(n, -1);
    int pos = 0;
    for (int m : order)
      for (const MInst& mi : mb_[m].code) {
        for (int d : def_use(mi).defs)
          if (first[d] < 0) first[d] = pos;
        ++pos;
      }
    std::vector<int> vs(n);
    for (int i = 0; i < n; ++i) vs[i] = i;
    std::stable_sort(vs.begin(), vs.end(), [&](int a, int b) { return first[a] < first[b]; });
    const int usable = cfg_.registers - 1;
    std::vector<int> color(n, 0);
    int highest = 0;
    for (int v : vs) {
      if (first[v] < 0) continue;  // never written (cannot happen for reachable code)
      std::vector<bool> taken(cfg_.registers, false);
      adj[v].each([&](std::size_t u) {
        if (color[u] > 0) taken[color[u]] = true;
      });
      int pick = 0;
      for (int h : hints[v])
        if (color[h] > 0 && !taken[color[h]]) {
          pick = color[h];
          break;
        }
      for (int r = 1; pick == 0 && r <= usable; ++r)
        if (!taken[r]) pick = r;
      if (pick == 0) {
        const int need = std::max(max_pressure, usable + 1);
        const std::string where =
            pressure_loc.line ? " (" + k_.source_path + ":" + std::to_string(pressure_loc.line) + ")" : "";
        return err(ErrorCode::kLimitExceeded, k_.loc,
                   "register pressure: needs " + std::to_string(need) + " registers at " + pressure_at + where +
                       ", the machine has " + std::to_string(usable) + " (r1-r" + std::to_string(usable) +
                       "), over by " + std::to_string(need - usable) + " (spilling is not implemented)");
      }
      color[v] = pick;
      highest = std::max(highest, pick);
    }

    // Physical instructions, then blocks split to the block rules.
    auto phys_op = [&](const MOp& m, Kind& kind, std::uint8_t& field, Slot& s) {
      switch (m.k) {
        case MOp::K::kVReg:
          kind = Kind::kReg;
          field = static_cast<std::uint8_t>(color[m.vreg]);
          break;
        case MOp::K::kImm:
          kind = Kind::kImm;
          s.in.imm = m.imm;
          s.reloc = m.reloc;
          break;
        case MOp::K::kSpecial:
          kind = Kind::kSpecial;
          field = static_cast<std::uint8_t>(m.sp);
          break;
        default:
          kind = Kind::kReg;
          field = 0;
          break;
      }
    };
    auto to_slot = [&](const MInst& mi) {
      Slot s;
      s.loc = mi.loc;
      s.in.op = mi.op;
      s.in.d = mi.d >= 0 ? static_cast<std::uint8_t>(color[mi.d]) : 0;
      s.in.flags = mi.flags;
      Kind ck = Kind::kReg;
      phys_op(mi.a, s.in.ak, s.in.a, s);
      phys_op(mi.b, s.in.bk, s.in.b, s);
      phys_op(mi.c, ck, s.in.c, s);
      const Format f = op_info(mi.op).format;
      if (f == kFmtLoad || f == kFmtStore || f == kFmtAtom || f == kFmtCas) {
        s.in.ak = s.in.bk = Kind::kReg;
        s.in.imm = mi.imm;
        s.reloc = mi.reloc;
      }
      return s;
    };
    struct Chunk {
      std::string label;
      std::vector<Slot> slots;
      Slot term;
      int t_mb = -1, f_mb = -1;  // targets as machine block ids; -1 with br: next chunk
    };
    std::vector<Chunk> chunks;
    std::vector<int> first_chunk(nb, -1);
    for (int m : order) {
      std::vector<Slot> seq;
      for (const MInst& mi : mb_[m].code) {
        if (mi.pcopy)
          sequentialize(mi, color, seq);
        else {
          Slot s = to_slot(mi);
          if (s.in.op == Op::kMov && s.in.ak == Kind::kReg && s.in.a == s.in.d) continue;  // coalesced
          seq.push_back(s);
        }
      }
      first_chunk[m] = static_cast<int>(chunks.size());
      int part = 0;
      auto open = [&]() {
        chunks.push_back(Chunk{mb_[m].label + (part ? "." + std::to_string(part) : ""), {}, {}, -1, -1});
        ++part;
      };
      open();
      int loads = 0, writes = 0;
      std::uint32_t tainted = 0;
      for (const Slot& s : seq) {
        const Unit u = op_info(s.in.op).unit;
        const bool reads = u == kUnitLoad || u == kUnitAtomic, writes_mem = u == kUnitStore || u == kUnitAtomic;
        const bool addr_tainted = (tainted >> s.in.a) & 1;
        const int at = static_cast<int>(chunks.back().slots.size());
        const bool fits = at < cfg_.block_instructions &&
                          !(reads && (writes > 0 || loads >= kMaxLoadsPerBlock || addr_tainted)) &&
                          !(writes_mem && writes >= kMaxWritesPerBlock);
        if (!fits) {
          Slot br;
          br.in.op = Op::kBr;
          chunks.back().term = br;  // target: the next chunk
          open();
          loads = writes = 0;
          tainted = 0;
        }
        if (u == kUnitMul || writes_mem)  // the multiplier and the memory write are in the last slot only
          while (static_cast<int>(chunks.back().slots.size()) < cfg_.block_instructions - 1)
            chunks.back().slots.push_back(Slot{});
        chunks.back().slots.push_back(s);
        loads += reads;
        writes += writes_mem;
        const Format f = op_info(s.in.op).format;
        const bool has_d = f == kFmtDA || f == kFmtDAB || f == kFmtDABC || f == kFmtLoad || f == kFmtAtom ||
                           f == kFmtCas || f == kFmtShfl;
        if (has_d && s.in.d != 0) {
          bool t = reads;
          if (s.in.ak == Kind::kReg) t |= (tainted >> s.in.a) & 1;
          if (s.in.bk == Kind::kReg) t |= (tainted >> s.in.b) & 1;
          if (f == kFmtDABC) t |= (tainted >> s.in.c) & 1;
          tainted = t ? (tainted | (1u << s.in.d)) : (tainted & ~(1u << s.in.d));
        }
      }
      const MTerm& t = mb_[m].term;
      Slot ts;
      ts.loc = t.loc;
      ts.in.op = t.op;
      if (t.op == Op::kBrc) ts.in.a = t.cond >= 0 ? static_cast<std::uint8_t>(color[t.cond]) : 0;
      chunks.back().term = ts;
      chunks.back().t_mb = t.t;
      chunks.back().f_mb = t.f;
    }
    // Resolve targets to chunk indices.
    const int nc = static_cast<int>(chunks.size());
    std::vector<int> tgt_t(nc), tgt_f(nc, -1);
    for (int i = 0; i < nc; ++i) {
      const Op op = chunks[i].term.in.op;
      if (op == Op::kExit)
        tgt_t[i] = -1;
      else if (chunks[i].t_mb < 0)
        tgt_t[i] = i + 1;
      else
        tgt_t[i] = first_chunk[chunks[i].t_mb];
      if (op == Op::kBrc) tgt_f[i] = first_chunk[chunks[i].f_mb];
    }
    // Forward empty blocks that only branch on (never the entry).
    std::vector<int> fwd(nc);
    for (int i = 0; i < nc; ++i) fwd[i] = i;
    auto final_of = [&](int i) {
      for (int hops = 0;
           hops <= nc && i > 0 && chunks[i].slots.empty() && chunks[i].term.in.op == Op::kBr && tgt_t[i] != i; ++hops)
        i = tgt_t[i];
      return i;
    };
    std::vector<int> index(nc, -1);
    int kept = 0;
    for (int i = 0; i < nc; ++i)
      if (final_of(i) == i) index[i] = kept++;
    auto prog = std::make_unique<Program>();
    for (int i = 0; i < nc; ++i) {
      if (index[i] < 0) continue;
      MachineBlock b;
      b.label = chunks[i].label;
      b.slots = chunks[i].slots;
      b.term = chunks[i].term;
      const Op op = b.term.in.op;
      if (op == Op::kBr || op == Op::kBar) b.term.in.imm = static_cast<std::uint32_t>(index[final_of(tgt_t[i])]);
      if (op == Op::kBrc)
        b.term.in.imm = static_cast<std::uint32_t>(index[final_of(tgt_t[i])]) |
                        (static_cast<std::uint32_t>(index[final_of(tgt_f[i])]) << 16);
      prog->blocks.push_back(std::move(b));
    }
    if (static_cast<int>(prog->blocks.size()) > cfg_.rom_blocks)
      return limit("the program", static_cast<long>(prog->blocks.size()), cfg_.rom_blocks,
                   "ROM blocks (of " + std::to_string(cfg_.block_instructions) + " instructions + a terminator)");
    prog->kernel_name = k_.name;
    prog->source_path = k_.source_path;
    for (const sdk::KernelParam& p : k_.params)
      prog->params.push_back({p.name, p.kind == sdk::KernelParam::Kind::kPointer});
    prog->shape = shape_;
    prog->config = cfg_;
    prog->shared_words_used = shared_words_;
    prog->registers_used = highest;
    return prog;
  }

  // A parallel copy as moves; cycles are broken with three xors (no spare register needed).
  void sequentialize(const MInst& mi, const std::vector<int>& color, std::vector<Slot>& out) {
    struct Copy {
      int dst;
      MOp src;
      int src_reg;  // physical, or -1 for a non-register source
    };
    std::vector<Copy> todo;
    for (const auto& [d, s] : mi.copies) {
      const int sr = s.k == MOp::K::kVReg ? color[s.vreg] : s.k == MOp::K::kZero ? 0 : -1;
      if (sr == color[d]) continue;
      todo.push_back({color[d], s, sr});
    }
    auto mov = [&](int d, const Copy& c) {
      Slot s;
      s.loc = mi.loc;
      s.in.op = Op::kMov;
      s.in.d = static_cast<std::uint8_t>(d);
      if (c.src_reg >= 0)
        s.in.a = static_cast<std::uint8_t>(c.src_reg);
      else if (c.src.k == MOp::K::kImm)
        s.in.ak = Kind::kImm, s.in.imm = c.src.imm, s.reloc = c.src.reloc;
      else
        s.in.ak = Kind::kSpecial, s.in.a = static_cast<std::uint8_t>(c.src.sp);
      out.push_back(s);
    };
    auto xor3 = [&](int x, int y) {
      for (auto [d, a, b] : {std::tuple{x, x, y}, std::tuple{y, y, x}, std::tuple{x, x, y}}) {
        Slot s;
        s.loc = mi.loc;
        s.in.op = Op::kXor;
        s.in.d = static_cast<std::uint8_t>(d);
        s.in.a = static_cast<std::uint8_t>(a);
        s.in.b = static_cast<std::uint8_t>(b);
        out.push_back(s);
      }
    };
    while (!todo.empty()) {
      bool progress = false;
      for (std::size_t i = 0; i < todo.size(); ++i) {
        const int d = todo[i].dst;
        const bool read_later = std::any_of(todo.begin(), todo.end(), [&](const Copy& c) { return c.src_reg == d; });
        if (!read_later) {
          mov(d, todo[i]);
          todo.erase(todo.begin() + static_cast<long>(i));
          progress = true;
          break;
        }
      }
      if (progress) continue;
      // Only register cycles remain: swap one pair into place.
      Copy c = todo.front();
      todo.erase(todo.begin());
      xor3(c.dst, c.src_reg);
      for (Copy& o : todo)
        if (o.src_reg == c.dst) o.src_reg = c.src_reg;
      // The swap may complete another copy (a two-value cycle leaves "x <- x"): drop it, or it
      // would count as a cycle and the xor swap of a register with itself zeroes it.
      std::erase_if(todo, [](const Copy& o) { return o.src_reg == o.dst; });
    }
  }

  const sdk::KernelIR& k_;
  sdk::LaunchShape shape_;
  MachineConfig cfg_;
  std::vector<const sdk::Instr*> def_;
  std::vector<std::uint64_t> shared_off_;
  int shared_words_ = 0;
  std::vector<std::size_t> order_;
  std::vector<bool> reachable_;
  std::vector<std::vector<Use>> uses_;
  std::map<const sdk::Instr*, std::size_t> block_of_;
  std::vector<Origin> origin_;
  std::vector<bool> wide_;  // i64 values whose high word is needed
  std::vector<MOp> hi_;     // their high words
  std::vector<LVal> val_;
  std::set<ValueId> dead_arg_;
  std::vector<MBlock> mb_;
  std::vector<std::vector<int>> chain_;
  std::vector<std::vector<int>> edge_before_;
  int cur_ = 0;
  std::size_t cur_ir_ = 0;
  int nv_ = 0;
  sdk::IrLoc loc_;
};

}  // namespace

sdk::Expected<std::unique_ptr<Program>> lower_kernel(const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                                     const MachineConfig& config) {
  return Lowerer(kernel, shape, config).run();
}

}  // namespace qgpu::simt
