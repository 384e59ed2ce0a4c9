#include "register_file.h"

#include <string>

#include "isa.h"
#include "names.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

constexpr int kWarpBits = 3;
constexpr int kRows = kProtoWarps * 16;  // (warp, register)
const Affine kOne{{}, 1};

// The raw 2-bit kind field of operand a or b (ISA.md encoding): reading it from the
// fetched row rather than decode's one-hot keeps every selector one layer earlier.
Word raw_kind(const SlotFields& s, Operand o) {
  const int pos = o == Operand::kA ? kPosAk : kPosBk;
  return Word(s.lo.begin() + pos, s.lo.begin() + pos + 2);
}

// The operand bit that is 1 iff the operand reads a register other than r0:
// a/b: [4·¬k0 + 4·¬k1 + Σ field ≥ 9] (kind 0 = reg); c: [Σ field ≥ 1]. 2 neurons.
sdk::Expected<Bit> reads_register(Circuit& c, const std::string& name, const SlotFields& s, Operand o) {
  const Word& field = o == Operand::kA ? s.a : o == Operand::kB ? s.b : s.c;
  std::vector<Term> t;
  for (const Bit& b : field) t.push_back(Term{b, 1});
  if (o == Operand::kC) return weights::threshold(c, "regs", name, std::move(t), 1);
  const Word k = raw_kind(s, o);
  t.push_back(Term{!k[0], 4});
  t.push_back(Term{!k[1], 4});
  return weights::threshold(c, "regs", name, std::move(t), 9);
}

}  // namespace

const char* operand_name(Operand o) {
  return o == Operand::kA ? "a" : o == Operand::kB ? "b" : "c";
}

sdk::Expected<RegisterFile> build_register_file(Circuit& c, const FetchDecode& fd,
                                                const std::vector<std::pair<int, Operand>>& reads) {
  for (std::size_t i = 0; i < reads.size(); ++i) {
    if (reads[i].first < 0 || reads[i].first >= fd.slots)
      return sdk::invalid_argument("register file: operand read of slot " + std::to_string(reads[i].first) +
                                   ", the fetch stage has slots 0.." + std::to_string(fd.slots - 1));
    for (std::size_t j = 0; j < i; ++j)
      if (reads[j] == reads[i])
        return sdk::invalid_argument("register file: slot " + std::to_string(reads[i].first) + " operand " +
                                     operand_name(reads[i].second) + " is read twice");
  }
  RegisterFile rf;
  const WregWrite& wr = fd.records.wreg;
  rf.wreg_reg = Word(wr.row.begin(), wr.row.begin() + kRegBits);  // row = warp·16 + reg
  rf.wreg_warp = Word(wr.row.begin() + kRegBits, wr.row.end());
  rf.wreg_lanes = wr.enable;
  rf.wreg_lane_value = wr.value;
  rf.wreg_value = wr.value[0];
  for (int l = 0; l < kProtoLanes; ++l) {
    auto ram = c.add_ram("regs", "lane" + std::to_string(l), kRows, 32);
    if (!ram) return ram.status();
    rf.rams[l] = *ram;
    QGPU_RETURN_IF_ERROR(c.ram_write(*ram, wr.row, wr.value[l], wr.enable[l]));
  }
  for (const auto& [slot, operand] : reads) {
    const SlotFields& s = fd.slot[static_cast<std::size_t>(slot)];
    const std::string base = "slot" + std::to_string(slot);
    const char* on = operand_name(operand);
    const Word& field = operand == Operand::kA ? s.a : operand == Operand::kB ? s.b : s.c;
    auto is_reg = reads_register(c, base + "." + on + "_is_reg", s, operand);
    if (!is_reg) return is_reg.status();
    OperandRead r;
    r.slot = slot;
    r.operand = operand;
    for (int l = 0; l < kProtoLanes; ++l) {
      const std::string name = base + ".lane" + std::to_string(l) + "." + on;
      // The read surfaces only on EXEC tokens (z gate), like the ROM reads.
      auto raw = c.ram_read(rf.rams[l], name + ".raw", concat(field, fd.exec_warp), fd.exec_is[0]);
      if (!raw) return raw.status();
      // In place: operand = is_reg·raw + kind_imm·imm + special; written as operand − raw.
      auto w = c.alias(*raw, name);
      if (!w) return w.status();
      MlpBuilder mb(c);
      for (int i = 0; i < 32; ++i) {
        const Bit out = (*w)[i];
        mb.select({!*is_reg, (*raw)[i]}, kOne, {Term{out, -1}});
        if (operand == Operand::kC) continue;
        const Word k = raw_kind(s, operand);
        mb.select({k[0], !k[1], s.imm[i]}, kOne, {Term{out, 1}});  // kind 1: immediate
        // %tid and %laneid (= tid, as a thread block has at most 32 threads): warp·4 + lane.
        for (Special sp : {Special::kTid, Special::kLaneId}) {
          std::vector<Bit> m = weights::spells(field, static_cast<unsigned>(sp));
          m.push_back(!k[0]);  // kind 2: special
          m.push_back(k[1]);
          if (i < 2 && ((l >> i) & 1)) mb.select(m, kOne, {Term{out, 1}});
          if (i >= 2 && i < 2 + kWarpBits) {
            m.push_back(fd.exec_warp[i - 2]);
            mb.select(m, kOne, {Term{out, 1}});
          }
        }
      }
      QGPU_RETURN_IF_ERROR(mb.commit(c.fields()[w->front().field].full_name(), raw->front().field));
      r.value[l] = std::move(*w);
    }
    rf.reads.push_back(std::move(r));
  }
  return rf;
}

}  // namespace qgpu::simt::circuit
