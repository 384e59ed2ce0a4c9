#include "wbanalysis.h"

#include <string>
#include <vector>

#include "isa.h"
#include "names.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

constexpr const char* kOwner = "wba";
constexpr int kLiveBits = 16;
constexpr int kBlockBits = kProtoBlockBits;
constexpr int kWarpBits = 3;

// w·[the opcode writes d]: a sum of one-hot opcode bits, so 0 or w without a neuron.
void add_writes(std::vector<Term>& t, const Word& opcode, double w) {
  for (int op = 0; op < kOpCount; ++op)
    if (writes_d(static_cast<Op>(op))) t.push_back(Term{opcode[static_cast<std::size_t>(op)], w});
}

sdk::Status check_width(const Word& w, int width, const std::string& what) {
  if (static_cast<int>(w.size()) == width) return sdk::Status::ok();
  return sdk::invalid_argument("write-back analysis: " + what + " has " + std::to_string(w.size()) +
                               " bits, expected " + std::to_string(width));
}

sdk::Status check_inputs(const Circuit& c, const WbAnalysisIn& in) {
  QGPU_RETURN_IF_ERROR(check_width(in.warp, kWarpBits, "warp"));
  QGPU_RETURN_IF_ERROR(check_width(in.lanes, kProtoLanes, "lanes"));
  QGPU_RETURN_IF_ERROR(check_width(in.exited, kProtoLanes, "exited"));
  QGPU_RETURN_IF_ERROR(check_width(in.live_write.row, kBlockBits, "live_write.row"));
  QGPU_RETURN_IF_ERROR(check_width(in.live_write.mask, kLiveBits, "live_write.mask"));
  for (int l = 0; l < kProtoLanes; ++l) {
    const std::string lane = "lane " + std::to_string(l);
    QGPU_RETURN_IF_ERROR(check_width(in.next_block[l], kBlockBits, lane + " next_block"));
    const int ram = in.reg_rams[l];
    if (ram < 0 || ram >= static_cast<int>(c.rams().size()) || c.rams()[ram].rows != kProtoWarps * kProtoRegisters ||
        c.rams()[ram].width != 32)
      return sdk::invalid_argument("write-back analysis: " + lane + " register RAM " + std::to_string(ram) +
                                   " is not a 128-row x 32-bit RAM of this circuit (RegisterFile::rams)");
  }
  for (int s = 0; s < kWbSlots; ++s) {
    const std::string slot = "slot " + std::to_string(s);
    QGPU_RETURN_IF_ERROR(check_width(in.slot[s].opcode, kOpCount, slot + " opcode"));
    QGPU_RETURN_IF_ERROR(check_width(in.slot[s].d, kRegBits, slot + " d"));
    for (int l = 0; l < kProtoLanes; ++l)
      QGPU_RETURN_IF_ERROR(check_width(in.slot[s].value[l], 32, slot + " lane " + std::to_string(l) + " value"));
  }
  return sdk::Status::ok();
}

// The body, under the enable guard.
sdk::Expected<WbAnalysis> build(Circuit& c, const WbAnalysisIn& in) {
  WbAnalysis out;
  auto ram = c.add_ram(kOwner, "live", kProtoBlocks, kLiveBits);
  if (!ram) return ram.status();
  out.live_ram = *ram;
  QGPU_RETURN_IF_ERROR(c.ram_write(*ram, in.live_write.row, in.live_write.mask, in.live_write.enable));
  // The shuffle sources (the `LIVE exited` row): one row, read at a constant address.
  const Word row0{c.zero()};
  auto shf_ram = c.add_ram(kOwner, "shuffled", 1, kLiveBits);
  if (!shf_ram) return shf_ram.status();
  out.shuffled_ram = *shf_ram;
  QGPU_RETURN_IF_ERROR(c.ram_write(*shf_ram, row0, in.live_write.mask, in.live_write.exited));

  // conflict[s][t] (s < t) = writes_t ∧ d_t == d_s: with D = Σ 2^j (d_s,j − d_t,j) ∈ [−15, 15]
  // and S = D + 16·writes_t, [S ≥ 16] − [S ≥ 17] (0 whenever writes_t = 0, as then S ≤ 15).
  auto conflict = c.computed(kOwner, "conflict", kWbSlots * (kWbSlots - 1) / 2);
  if (!conflict) return conflict.status();
  std::array<std::vector<Bit>, kWbSlots> later;  // per s: conflict bits with every t > s
  {
    MlpBuilder mb(c);
    int k = 0;
    for (int s = 0; s < kWbSlots; ++s)
      for (int t = s + 1; t < kWbSlots; ++t, ++k) {
        std::vector<Term> terms;
        for (int j = 0; j < kRegBits; ++j) {
          terms.push_back(Term{in.slot[s].d[j], static_cast<double>(1 << j)});
          terms.push_back(Term{in.slot[t].d[j], -static_cast<double>(1 << j)});
        }
        add_writes(terms, in.slot[t].opcode, 16);
        const Bit b = (*conflict)[k];
        QGPU_RETURN_IF_ERROR(mb.step(terms, 16, {Term{b, 1}}));
        QGPU_RETURN_IF_ERROR(mb.step(terms, 17, {Term{b, -1}}));
        later[s].push_back(b);
      }
    QGPU_RETURN_IF_ERROR(mb.commit("wba.conflict"));
  }
  // final_s = [8·writes_s + Σ d_s,j − 8·Σ_t conflict_s,t ≥ 9]: d_s != 0 adds 1..4, a conflict takes 8.
  auto fin = c.computed(kOwner, "final", kWbSlots);
  if (!fin) return fin.status();
  {
    MlpBuilder mb(c);
    for (int s = 0; s < kWbSlots; ++s) {
      std::vector<Term> terms;
      add_writes(terms, in.slot[s].opcode, 8);
      for (const Bit& b : in.slot[s].d) terms.push_back(Term{b, 1});
      for (const Bit& b : later[s]) terms.push_back(Term{b, -8});
      QGPU_RETURN_IF_ERROR(mb.step(terms, 9, {Term{(*fin)[s], 1}}));
      out.is_final[s] = (*fin)[s];
    }
    QGPU_RETURN_IF_ERROR(mb.commit("wba.final"));
  }

  // The register rows before the block, and per byte e = [value byte == row byte]:
  // D = Σ 2^j (v_j − row_j) ∈ [−255, 255], e = [D ≥ 0] − [D ≥ 1].
  std::array<std::array<Word, kProtoLanes>, kWbSlots> same;  // 4 bits per (slot, lane)
  for (int s = 0; s < kWbSlots; ++s) {
    const std::string sn = "s" + std::to_string(s);
    MlpBuilder mb(c);
    for (int l = 0; l < kProtoLanes; ++l) {
      const std::string ln = sn + ".lane" + std::to_string(l);
      auto row = c.ram_read(in.reg_rams[l], "wba." + ln + ".row", concat(in.slot[s].d, in.warp),
                            in.read_enable[s].value_or(in.enable));
      if (!row) return row.status();
      auto e = c.computed(kOwner, ln + ".same", 4);
      if (!e) return e.status();
      for (int g = 0; g < 4; ++g) {
        std::vector<Term> d;
        for (int j = 0; j < 8; ++j) {
          d.push_back(Term{in.slot[s].value[l][8 * g + j], static_cast<double>(1 << j)});
          d.push_back(Term{(*row)[8 * g + j], -static_cast<double>(1 << j)});
        }
        QGPU_RETURN_IF_ERROR(mb.step(d, 0, {Term{(*e)[g], 1}}));
        QGPU_RETURN_IF_ERROR(mb.step(d, 1, {Term{(*e)[g], -1}}));
      }
      same[s][l] = *e;
    }
    QGPU_RETURN_IF_ERROR(mb.commit("wba." + sn + ".same"));
  }

  // Each lane's live set at its next block, and the exited lanes' (with the last slot's
  // late enable: the read lands next to the last register-row reads, not at layer 0).
  std::array<Word, kProtoLanes> live;
  for (int l = 0; l < kProtoLanes; ++l) {
    auto r = c.ram_read(*ram, "lane" + std::to_string(l), in.next_block[l], in.enable);
    if (!r) return r.status();
    live[l] = *r;
  }
  auto shuffled = c.ram_read(*shf_ram, "exec", row0, in.read_enable[kWbSlots - 1].value_or(in.enable));
  if (!shuffled) return shuffled.status();

  // emit_s,l = Σ_r Σ_src [S ≥ 61], S = 8·(d_s matches r: 4 terms) + 8·final_s + 8·mask_l
  // + 8·(¬exited_l, live_l[r]  |  exited_l, shuffled[r]) − Σ_g same_g: all eight terms and a
  // differing byte (Σ same ≤ 3) reach 61, one missing term caps S at 56. Exactly one
  // (r, source) can fire, so the emit bit is 0 or 1.
  MlpBuilder mb(c);
  for (int s = 0; s < kWbSlots; ++s) {
    auto emit = c.computed(kOwner, "s" + std::to_string(s) + ".emit", kProtoLanes);
    if (!emit) return emit.status();
    for (int l = 0; l < kProtoLanes; ++l)
      for (int r = 1; r < kProtoRegisters; ++r)
        for (int src = 0; src < 2; ++src) {
          std::vector<Term> t;
          for (int j = 0; j < kRegBits; ++j) t.push_back(Term{(r >> j) & 1 ? in.slot[s].d[j] : !in.slot[s].d[j], 8});
          t.push_back(Term{(*fin)[s], 8});
          t.push_back(Term{in.lanes[l], 8});
          t.push_back(Term{src ? in.exited[l] : !in.exited[l], 8});
          t.push_back(Term{src ? (*shuffled)[r] : live[l][r], 8});
          for (const Bit& b : same[s][l]) t.push_back(Term{b, -1});
          QGPU_RETURN_IF_ERROR(mb.step(t, 61, {Term{(*emit)[l], 1}}));
        }
    out.slot[s].dest = in.slot[s].d;
    out.slot[s].emit = *emit;
    out.slot[s].value = in.slot[s].value;
  }
  QGPU_RETURN_IF_ERROR(mb.commit("wba.emit"));
  return out;
}

}  // namespace

sdk::Expected<WbAnalysis> build_wb_analysis(Circuit& c, const WbAnalysisIn& in) {
  QGPU_RETURN_IF_ERROR(check_inputs(c, in));
  c.push_enable(in.enable);
  auto out = build(c, in);
  c.pop_enable();
  return out;
}

}  // namespace qgpu::simt::circuit
