#include "operands.h"

#include <string>

#include "isa.h"
#include "names.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

const Affine kOne{{}, 1};
constexpr int kWarpBits = 3;

std::vector<Bit> join(std::vector<Bit> a, const std::vector<Bit>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

sdk::Status check_width(const std::string& owner, const std::string& what, const Word& w, std::size_t want) {
  if (w.size() == want) return sdk::Status::ok();
  return sdk::invalid_argument("operands " + owner + ": " + what + " has " + std::to_string(w.size()) +
                               " bits, needs " + std::to_string(want));
}

sdk::Status check_inputs(const OperandsIn& in) {
  const std::string& o = in.owner;
  QGPU_RETURN_IF_ERROR(check_width(o, "warp", in.warp, kWarpBits));
  QGPU_RETURN_IF_ERROR(check_width(o, "lanes", in.lanes, kProtoLanes));
  if (in.want_a) QGPU_RETURN_IF_ERROR(check_width(o, "a", in.a, kRegBits));
  if (in.want_b) QGPU_RETURN_IF_ERROR(check_width(o, "b", in.b, kRegBits));
  if (in.want_c) QGPU_RETURN_IF_ERROR(check_width(o, "c", in.c, kRegBits));
  if (in.want_a || in.want_b) {
    if (in.want_a) QGPU_RETURN_IF_ERROR(check_width(o, "ak", in.ak, 2));
    if (in.want_b) QGPU_RETURN_IF_ERROR(check_width(o, "bk", in.bk, 2));
    QGPU_RETURN_IF_ERROR(check_width(o, "imm", in.imm, 32));
    QGPU_RETURN_IF_ERROR(check_width(o, "ntid", in.ntid, 32));
    QGPU_RETURN_IF_ERROR(check_width(o, "ctaid", in.ctaid, 32));
    QGPU_RETURN_IF_ERROR(check_width(o, "nctaid", in.nctaid, 32));
  }
  for (std::size_t j = 0; j < in.earlier.size(); ++j) {
    const EarlierSlot& e = in.earlier[j];
    const std::string p = "earlier slot " + std::to_string(j) + " ";
    QGPU_RETURN_IF_ERROR(check_width(o, p + "opcode", e.opcode, kOpCount));
    QGPU_RETURN_IF_ERROR(check_width(o, p + "d", e.d, kRegBits));
    if (in.defer_last && j + 1 == in.earlier.size()) continue;  // its value is the caller's
    for (int l = 0; l < kProtoLanes; ++l)
      QGPU_RETURN_IF_ERROR(check_width(o, p + "lane " + std::to_string(l) + " value", e.value[l], 32));
  }
  if (in.defer_last && in.earlier.empty())
    return sdk::invalid_argument("operands " + o + ": defer_last needs at least one earlier slot");
  for (int l = 0; l < kProtoLanes; ++l)
    if (in.rams[l] < 0)
      return sdk::invalid_argument("operands " + o + ": lane " + std::to_string(l) +
                                   " has no register RAM (RegisterFile::rams)");
  return sdk::Status::ok();
}

// The bits of one operand the select needs.
struct OperandPlan {
  Operand which = Operand::kA;
  const Word* field = nullptr;        // 4-bit register / special number
  const Word* kind = nullptr;         // 2-bit raw kind; null for c (always a register)
  Word hit;                           // per earlier slot, then nz (empty for slot 0)
  Word take;                          // per earlier slot
  std::array<Bit, kProtoLanes> keep;  // read enable of each lane's register read
};

// Terms/bits that are 1 iff the operand is of kind register.
std::vector<Bit> reg_kind(const OperandPlan& p) {
  if (!p.kind) return {};
  return {!(*p.kind)[0], !(*p.kind)[1]};
}

// hit_j and nz (MLP after decode).
sdk::Status build_hits(Circuit& c, const OperandsIn& in, OperandPlan& p) {
  const int s = static_cast<int>(in.earlier.size());
  const std::string name = in.owner + "." + operand_name(p.which) + ".hit";
  auto hit = c.computed(in.owner, std::string(operand_name(p.which)) + ".hit", s + 1);
  if (!hit) return hit.status();
  MlpBuilder mb(c);
  for (int j = 0; j < s; ++j) {
    const EarlierSlot& e = in.earlier[static_cast<std::size_t>(j)];
    // S = f + (15 - d) + 16·writes + 16·[kind reg] (a/b: 2 terms); all conditions: S = top + f - d.
    std::vector<Term> t;
    for (int i = 0; i < kRegBits; ++i) {
      t.push_back(Term{(*p.field)[i], static_cast<double>(1 << i)});
      t.push_back(Term{!e.d[i], static_cast<double>(1 << i)});
    }
    for (int k = 0; k < kOpCount; ++k)
      if (writes_d(static_cast<Op>(k))) t.push_back(Term{e.opcode[k], 16});
    for (const Bit& b : reg_kind(p)) t.push_back(Term{b, 16});
    const double top = 15 + 16.0 * (1 + static_cast<double>(reg_kind(p).size()));
    QGPU_RETURN_IF_ERROR(mb.step(t, top, {Term{(*hit)[j], 1}}));
    QGPU_RETURN_IF_ERROR(mb.step(std::move(t), top + 1, {Term{(*hit)[j], -1}}));
  }
  std::vector<Term> nz;
  for (int i = 0; i < kRegBits; ++i) nz.push_back(Term{(*p.field)[i], 1});
  QGPU_RETURN_IF_ERROR(mb.step(std::move(nz), 1, {Term{(*hit)[s], 1}}));
  QGPU_RETURN_IF_ERROR(mb.commit(name));
  p.hit = std::move(*hit);
  return sdk::Status::ok();
}

// take_j and keep_l (one MLP, before the reads). `after` splits each keep selector in two.
sdk::Status build_take_keep(Circuit& c, const OperandsIn& in, OperandPlan& p) {
  const int s = static_cast<int>(in.earlier.size());
  const char* on = operand_name(p.which);
  // Slot 0's c without `after`: the read is on wherever the unit is.
  if (s == 0 && !p.kind && !in.after) {
    p.keep.fill(in.enable);
    return sdk::Status::ok();
  }
  const int keeps = s == 0 ? 1 : kProtoLanes;
  auto sel = c.computed(in.owner, std::string(on) + ".sel", s + keeps);
  if (!sel) return sel.status();
  MlpBuilder mb(c);
  auto timed = [&](const std::vector<Bit>& match, const Bit& out) {
    if (!in.after) {
      mb.select(match, kOne, {Term{out, 1}});
      return;
    }
    mb.select(join(match, {*in.after}), kOne, {Term{out, 1}});
    mb.select(join(match, {!*in.after}), kOne, {Term{out, 1}});
  };
  for (int j = 0; j < s; ++j) {
    std::vector<Bit> m{p.hit[j], p.hit[s]};
    for (int k = j + 1; k < s; ++k) m.push_back(!p.hit[k]);
    mb.select(m, kOne, {Term{(*sel)[j], 1}});
  }
  if (s == 0) {
    timed(reg_kind(p), (*sel)[0]);
  } else {
    std::vector<Bit> none = reg_kind(p);
    for (int j = 0; j < s; ++j) none.push_back(!p.hit[j]);
    for (int l = 0; l < kProtoLanes; ++l) {
      const Bit out = (*sel)[s + l];
      timed(join(reg_kind(p), {!in.lanes[l]}), out);
      timed(join(none, {in.lanes[l]}), out);
    }
  }
  QGPU_RETURN_IF_ERROR(mb.commit(in.owner + "." + on + ".sel"));
  p.take = Word(sel->begin(), sel->begin() + s);
  for (int l = 0; l < kProtoLanes; ++l) p.keep[l] = (*sel)[s + (s == 0 ? 0 : l)];
  return sdk::Status::ok();
}

// The register read of lane l and the in-place select (one MLP).
sdk::Expected<Word> build_lane(Circuit& c, const OperandsIn& in, const OperandPlan& p, int l) {
  // The earlier slots selected here (defer_last leaves the last one to the caller).
  const int s = static_cast<int>(in.earlier.size()) - (in.defer_last ? 1 : 0);
  const std::string name = in.owner + ".lane" + std::to_string(l) + "." + operand_name(p.which);
  auto raw = c.ram_read(in.rams[l], name + ".raw", concat(*p.field, in.warp), p.keep[l]);
  if (!raw) return raw.status();
  if (s == 0 && !p.kind) return raw;  // slot 0's c: the register itself
  auto out = c.alias(*raw, name);
  if (!out) return out.status();
  MlpBuilder mb(c);
  // Every neuron below fires only where the read is 0 (keep_l = 0); one of them also
  // matches ¬raw[0], which changes nothing but makes the select wait for the read.
  const Bit raw0_zero = !(*raw)[0];
  const std::vector<Bit> imm_kind = p.kind ? std::vector<Bit>{(*p.kind)[0], !(*p.kind)[1]} : std::vector<Bit>{};
  const std::vector<Bit> spc_kind = p.kind ? std::vector<Bit>{!(*p.kind)[0], (*p.kind)[1]} : std::vector<Bit>{};
  const Word& f = *p.field;
  for (int i = 0; i < 32; ++i) {
    const Bit o = (*out)[i];
    for (int j = 0; j < s; ++j) {
      std::vector<Bit> m{p.take[j], in.lanes[l], in.earlier[static_cast<std::size_t>(j)].value[l][i]};
      if (i == 0 && j == s - 1) m.push_back(raw0_zero);
      mb.select(m, kOne, {Term{o, 1}});
    }
    if (!p.kind) continue;
    std::vector<Bit> im = join(imm_kind, {in.imm[i]});
    if (i == 0 && s == 0) im.push_back(raw0_zero);
    mb.select(im, kOne, {Term{o, 1}});
    // %tid (0) and %laneid (4) are both warp·4 + lane: numbers 0 and 4 match ¬f0 ¬f1 ¬f3.
    const std::vector<Bit> tid = join(spc_kind, {!f[0], !f[1], !f[3]});
    if (i < 2 && ((l >> i) & 1)) mb.select(tid, kOne, {Term{o, 1}});
    if (i >= 2 && i < 2 + kWarpBits) mb.select(join(tid, {in.warp[i - 2]}), kOne, {Term{o, 1}});
    const std::pair<Special, const Word*> words[] = {
        {Special::kNtid, &in.ntid}, {Special::kCtaid, &in.ctaid}, {Special::kNctaid, &in.nctaid}};
    for (const auto& [sp, w] : words) {
      const Bit v = (*w)[i];
      if (v == c.zero()) continue;  // a constant 0 bit (control's words are padded) costs nothing
      std::vector<Bit> m = join(spc_kind, weights::spells(f, static_cast<unsigned>(sp)));
      if (v != c.one()) m.push_back(v);
      mb.select(m, kOne, {Term{o, 1}});
    }
  }
  QGPU_RETURN_IF_ERROR(mb.commit(c.fields()[out->front().field].full_name(), raw->front().field));
  return out;
}

sdk::Status build_all(Circuit& c, const OperandsIn& in, OperandsOut& res) {
  for (Operand o : {Operand::kA, Operand::kB, Operand::kC}) {
    if (!(o == Operand::kA ? in.want_a : o == Operand::kB ? in.want_b : in.want_c)) continue;
    OperandPlan p;
    p.which = o;
    p.field = o == Operand::kA ? &in.a : o == Operand::kB ? &in.b : &in.c;
    p.kind = o == Operand::kA ? &in.ak : o == Operand::kB ? &in.bk : nullptr;
    if (!in.earlier.empty()) QGPU_RETURN_IF_ERROR(build_hits(c, in, p));
    QGPU_RETURN_IF_ERROR(build_take_keep(c, in, p));
    if (in.defer_last) res.take_last[static_cast<std::size_t>(o)] = p.take.back();
    auto& dst = o == Operand::kA ? res.a : o == Operand::kB ? res.b : res.c;
    for (int l = 0; l < kProtoLanes; ++l) {
      auto w = build_lane(c, in, p, l);
      if (!w) return w.status();
      dst[l] = std::move(*w);
    }
  }
  return sdk::Status::ok();
}

}  // namespace

sdk::Expected<OperandsOut> build_operands(Circuit& c, const OperandsIn& in) {
  QGPU_RETURN_IF_ERROR(check_inputs(in));
  OperandsOut res;
  if (in.defer_last) res.take_last = Word(3, c.zero());
  c.push_enable(in.enable);
  sdk::Status st = build_all(c, in, res);
  c.pop_enable();
  if (!st.is_ok()) return st;
  return res;
}

OperandsIn operands_in(const FetchDecode& fd, const RegisterFile& rf, int slot) {
  const SlotFields& s = fd.slot[static_cast<std::size_t>(slot)];
  OperandsIn in;
  in.owner = "ops.s" + std::to_string(slot);
  in.enable = fd.exec_is[0];
  in.rams = rf.rams;
  in.warp = fd.exec_warp;
  in.lanes = fd.exec_lanes;
  in.a = s.a;
  in.b = s.b;
  in.c = s.c;
  // The raw kind fields of the fetched row (decode's one-hot is one MLP later).
  in.ak = Word(s.lo.begin() + kPosAk, s.lo.begin() + kPosAk + 2);
  in.bk = Word(s.lo.begin() + kPosBk, s.lo.begin() + kPosBk + 2);
  in.imm = s.imm;
  return in;
}

EarlierSlot earlier_slot(const SlotFields& s, const std::array<Word, kProtoLanes>& value) {
  return EarlierSlot{s.opcode, s.d, value};
}

}  // namespace qgpu::simt::circuit
