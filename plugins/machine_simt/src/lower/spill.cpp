#include "lower/spill.h"

namespace qgpu::simt::lower {
namespace {

class Rewriter {
 public:
  Rewriter(Function& function, int vreg, std::uint32_t offset, std::vector<bool>& temporary)
      : f_(function), vreg_(vreg), offset_(offset), temporary_(temporary) {}

  void run() {
    for (Block& block : f_.blocks) {
      std::vector<Instruction> code;
      for (Instruction& mi : block.code) rewrite(std::move(mi), code);
      if (block.term.op == Op::kBrc && block.term.condition == vreg_)
        block.term.condition = reload(block.term.loc, code);
      block.code = std::move(code);
    }
    temporary_.resize(static_cast<std::size_t>(f_.vregs), false);
  }

 private:
  int fresh() {
    const int v = f_.vregs++;
    temporary_.resize(static_cast<std::size_t>(f_.vregs), false);
    temporary_[static_cast<std::size_t>(v)] = true;
    return v;
  }

  // The slot's byte address in a new register: 4 * %tid (the offset is the instruction's).
  int address(const sdk::IrLoc& loc, std::vector<Instruction>& code) {
    Instruction shl;
    shl.op = Op::kShl;
    shl.dest = fresh();
    shl.a = Operand::special_reg(Special::kTid);
    shl.b = imm(2);
    shl.loc = loc;
    code.push_back(shl);
    return shl.dest;
  }

  int reload(const sdk::IrLoc& loc, std::vector<Instruction>& code) {
    const int at = address(loc, code);
    Instruction ld;
    ld.op = Op::kLd;
    ld.dest = fresh();
    ld.a = Operand::reg(at);
    ld.offset = offset_;
    ld.flags = kFlagShared;
    ld.loc = loc;
    code.push_back(ld);
    return ld.dest;
  }

  void store(int value, const sdk::IrLoc& loc, std::vector<Instruction>& code) {
    const int at = address(loc, code);
    Instruction st;
    st.op = Op::kSt;
    st.a = Operand::reg(at);
    st.b = Operand::reg(value);
    st.offset = offset_;
    st.flags = kFlagShared;
    st.loc = loc;
    code.push_back(st);
  }

  void rewrite(Instruction mi, std::vector<Instruction>& code) {
    int loaded = -1;  // one reload serves every operand of the instruction
    auto use = [&](Operand& m) {
      if (!m.is_vreg() || m.vreg != vreg_) return;
      if (loaded < 0) loaded = reload(mi.loc, code);
      m = Operand::reg(loaded);
    };
    int defined = -1;
    if (mi.parallel_copy) {
      for (auto& [dest, source] : mi.copies) {
        use(source);
        if (dest == vreg_) dest = defined = fresh();
      }
    } else {
      use(mi.a);
      use(mi.b);
      use(mi.c);
      if (mi.dest == vreg_) mi.dest = defined = fresh();
    }
    const sdk::IrLoc loc = mi.loc;
    code.push_back(std::move(mi));
    if (defined >= 0) store(defined, loc, code);
  }

  Function& f_;
  const int vreg_;
  const std::uint32_t offset_;
  std::vector<bool>& temporary_;
};

}  // namespace

void spill_everywhere(Function& function, int vreg, std::uint32_t offset, std::vector<bool>& temporary) {
  Rewriter(function, vreg, offset, temporary).run();
}

}  // namespace qgpu::simt::lower
