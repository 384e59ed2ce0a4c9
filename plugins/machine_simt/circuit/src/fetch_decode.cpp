#include "fetch_decode.h"

#include <string>

#include "names.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

// One-hot of a small binary field: bit k is 1 iff w == k (1 selector neuron per value).
sdk::Expected<Word> one_hot(Circuit& c, const std::string& owner, const std::string& name, const Word& w, int values) {
  auto out = c.computed(owner, name, values);
  if (!out) return out.status();
  MlpBuilder mb(c);
  for (int k = 0; k < values; ++k) mb.select(weights::spells(w, static_cast<unsigned>(k)), Affine{{}, 1}, {Term{(*out)[k], 1}});
  QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + name));
  return out;
}

// kind == kSpecial and number < Special::kCount: 16·k1 + 16·¬k0 − number ≥ 32 − (kCount − 1).
sdk::Expected<Bit> special_ok(Circuit& c, const std::string& owner, const std::string& name, const Word& kind,
                              const Word& number) {
  std::vector<Term> t{{kind[1], 16}, {!kind[0], 16}};
  for (std::size_t i = 0; i < number.size(); ++i) t.push_back(Term{number[i], -static_cast<double>(1u << i)});
  return weights::threshold(c, owner, name, std::move(t), 32 - (static_cast<int>(Special::kCount) - 1));
}

// The plain fields are views of the fetched halves (no neurons, no channels): the
// reads are already 0 on every token but EXEC.
void set_views(SlotFields& s) {
  const Word& lo = s.lo;
  s.d = slice(lo, kPosD, kRegBits);
  s.a = slice(lo, kPosA, kRegBits);
  s.b = slice(lo, kPosB, kRegBits);
  s.c = slice(lo, kPosC, kRegBits);
  s.flags = slice(lo, kPosFlags, 6);
  s.imm = s.hi;
}

sdk::Status decode_slot(Circuit& c, const std::string& owner, SlotFields& s) {
  const Word& lo = s.lo;
  set_views(s);
  auto op = one_hot(c, owner, "opcode", slice(lo, 0, kOpcodeBits), kOpCount);
  if (!op) return op.status();
  s.opcode = std::move(*op);
  auto ak = one_hot(c, owner, "ak", slice(lo, kPosAk, 2), 3);
  if (!ak) return ak.status();
  s.ak = std::move(*ak);
  auto bk = one_hot(c, owner, "bk", slice(lo, kPosBk, 2), 3);
  if (!bk) return bk.status();
  s.bk = std::move(*bk);
  // Operand kinds that decode() accepts: reg, imm, or a special with a number in range.
  auto aspec = special_ok(c, owner, "ak_special_ok", slice(lo, kPosAk, 2), slice(lo, kPosA, kRegBits));
  if (!aspec) return aspec.status();
  auto bspec = special_ok(c, owner, "bk_special_ok", slice(lo, kPosBk, 2), slice(lo, kPosB, kRegBits));
  if (!bspec) return bspec.status();
  // valid = opcode in table ∧ a ok ∧ b ok: the three sums are each 0 or 1.
  std::vector<Term> v;
  for (const Bit& b : s.opcode) v.push_back(Term{b, 1});
  for (const Bit& b : {s.ak[0], s.ak[1], *aspec, s.bk[0], s.bk[1], *bspec}) v.push_back(Term{b, 1});
  auto valid = weights::threshold(c, owner, "valid", std::move(v), 3);
  if (!valid) return valid.status();
  s.valid = *valid;
  return sdk::Status::ok();
}

}  // namespace

namespace {

// dest (a copy of d) and writes (the opcode writes d) of a fetched row into `mb`, in fields
// of their own; s.lo and s.d must be set.
sdk::Status dest_writes(Circuit& c, const std::string& owner, SlotFields& s, MlpBuilder& mb) {
  auto dest = c.computed(owner, "dest", kRegBits);
  if (!dest) return dest.status();
  auto wr = c.computed(owner, "writes", 1);
  if (!wr) return wr.status();
  const Affine one{{}, 1};
  for (int i = 0; i < kRegBits; ++i) mb.select({s.d[i]}, one, {Term{(*dest)[i], 1}});
  int first = -1;
  for (int k2 = 0; k2 < kOpCount; ++k2) {
    if (!writes_d(static_cast<Op>(k2))) continue;
    if (first < 0) first = k2;
    mb.select(weights::spells(slice(s.lo, 0, kOpcodeBits), static_cast<unsigned>(k2)), one, {Term{(*wr)[0], 1}});
  }
  s.dest = std::move(*dest);
  s.writes = (*wr)[0];
  s.writes_op = Word(kOpCount, c.zero());
  s.writes_op[static_cast<std::size_t>(first)] = s.writes;
  return sdk::Status::ok();
}

// Records, the ROM RAMs and their write ports; the slots' fields stay empty.
sdk::Expected<FetchDecode> rom_rams(Circuit& c, int slots) {
  if (slots < 1 || slots > kProtoRowsPerBlock)
    return sdk::invalid_argument("fetch/decode: " + std::to_string(slots) +
                                 " ROM slots per block, the protocol holds 1.." + std::to_string(kProtoRowsPerBlock));
  FetchDecode fd;
  fd.slots = slots;
  auto rec = build_records(c, slots);
  if (!rec) return rec.status();
  fd.records = std::move(*rec);
  const Records& r = fd.records;
  fd.rom_block = r.rom.row;
  fd.rom_select = r.rom.select;
  fd.rom_payload = r.rom.data;
  fd.exec_is = r.exec_is;
  fd.exec_block = r.exec_block;
  fd.exec_warp = r.exec_warp;
  fd.exec_lanes = r.exec_lanes;
  fd.slot.resize(static_cast<std::size_t>(slots));
  for (int k = 0; k < slots; ++k) {
    for (int h = 0; h < 2; ++h) {
      const std::string name = "s" + std::to_string(k) + (h ? ".hi" : ".lo");
      auto ram = c.add_ram("rom", name, kProtoBlocks, 32);
      if (!ram) return ram.status();
      fd.rams.push_back(*ram);
      QGPU_RETURN_IF_ERROR(c.ram_write(*ram, fd.rom_block, fd.rom_payload, fd.rom_select[2 * k + h]));
    }
  }
  return fd;
}

sdk::Status check_slot(const FetchDecode& fd, int k) {
  if (k < 0 || k >= fd.slots)
    return sdk::invalid_argument("fetch/decode: slot " + std::to_string(k) + " of " + std::to_string(fd.slots));
  return sdk::Status::ok();
}

}  // namespace

sdk::Expected<FetchDecode> build_fetch_decode(Circuit& c, int slots) {
  auto r = rom_rams(c, slots);
  if (!r) return r.status();
  FetchDecode fd = std::move(*r);
  for (int k = 0; k < slots; ++k) {
    for (int h = 0; h < 2; ++h) {
      const std::string name = "s" + std::to_string(k) + (h ? ".hi" : ".lo");
      // The read surfaces only on EXEC tokens (z gate), so decode sees 0 elsewhere.
      auto rd = c.ram_read(fd.rams[static_cast<std::size_t>(2 * k + h)], "fetch." + name, fd.exec_block, fd.exec_is[0]);
      if (!rd) return rd.status();
      (h ? fd.slot[k].hi : fd.slot[k].lo) = std::move(*rd);
    }
  }
  // Decode only on EXEC tokens: every other token keeps the placeholders (0).
  c.push_enable(fd.exec_is[0]);
  for (int k = 0; k < slots; ++k) {
    sdk::Status s = decode_slot(c, "decode.s" + std::to_string(k), fd.slot[k]);
    if (!s.is_ok()) {
      c.pop_enable();
      return s;
    }
  }
  c.pop_enable();
  return fd;
}

sdk::Expected<FetchDecode> build_fetch_rams(Circuit& c, int slots) { return rom_rams(c, slots); }

sdk::Status fetch_slot(Circuit& c, FetchDecode& fd, int k, Bit enable, const std::string& tag, bool decode) {
  QGPU_RETURN_IF_ERROR(check_slot(fd, k));
  SlotFields& s = fd.slot[static_cast<std::size_t>(k)];
  SlotFields early;  // fetch_dest_early's fields, kept
  early.dest = s.dest;
  early.writes = s.writes;
  early.writes_op = s.writes_op;
  const bool have_dest = !s.dest.empty();
  s = SlotFields{};
  if (have_dest) {
    s.dest = early.dest;
    s.writes = early.writes;
    s.writes_op = early.writes_op;
  }
  for (int h = 0; h < 2; ++h) {
    const std::string name = tag + (h ? ".hi" : ".lo");
    auto rd = c.ram_read(fd.rams[static_cast<std::size_t>(2 * k + h)], "fetch." + name, fd.exec_block, enable);
    if (!rd) return rd.status();
    (h ? s.hi : s.lo) = std::move(*rd);
  }
  set_views(s);
  if (!decode) return sdk::Status::ok();
  if (!have_dest) {
    c.push_enable(enable);
    MlpBuilder mb(c);
    sdk::Status st = dest_writes(c, "decode." + tag, s, mb);
    if (st.is_ok()) st = mb.commit("decode." + tag + ".dest");
    c.pop_enable();
    QGPU_RETURN_IF_ERROR(st);
  }
  return decode_ops(c, fd, k, enable, tag);
}

sdk::Status decode_ops(Circuit& c, FetchDecode& fd, int k, Bit enable, const std::string& tag) {
  QGPU_RETURN_IF_ERROR(check_slot(fd, k));
  SlotFields& s = fd.slot[static_cast<std::size_t>(k)];
  const std::string owner = "decode." + tag;
  c.push_enable(enable);
  sdk::Status st = [&]() -> sdk::Status {
    auto op = one_hot(c, owner, "opcode", slice(s.lo, 0, kOpcodeBits), kOpCount);
    if (!op) return op.status();
    s.opcode = std::move(*op);
    auto fl = c.computed(owner, "flags", 6);
    if (!fl) return fl.status();
    const Affine one{{}, 1};
    MlpBuilder mb(c);
    for (int i = 0; i < 6; ++i) mb.select({s.flags[i]}, one, {Term{(*fl)[i], 1}});
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".flags"));
    s.flag_bits = std::move(*fl);
    return sdk::Status::ok();
  }();
  c.pop_enable();
  return st;
}

sdk::Status fetch_dest_early(Circuit& c, FetchDecode& fd, int k) {
  QGPU_RETURN_IF_ERROR(check_slot(fd, k));
  SlotFields& s = fd.slot[static_cast<std::size_t>(k)];
  auto rd = c.ram_read(fd.rams[static_cast<std::size_t>(2 * k)], "fetch.s" + std::to_string(k) + "e.lo", fd.exec_block,
                       fd.exec_is[0]);
  if (!rd) return rd.status();
  SlotFields tmp;
  tmp.lo = *rd;
  tmp.d = slice(tmp.lo, kPosD, kRegBits);
  c.push_enable(fd.exec_is[0]);
  MlpBuilder mb(c);
  const std::string owner = "decode.s" + std::to_string(k) + "e";
  sdk::Status st = dest_writes(c, owner, tmp, mb);
  if (st.is_ok()) st = mb.commit(owner + ".dest");
  c.pop_enable();
  QGPU_RETURN_IF_ERROR(st);
  s.dest = tmp.dest;
  s.writes = tmp.writes;
  s.writes_op = tmp.writes_op;
  return sdk::Status::ok();
}

sdk::Expected<TermEarly> fetch_term_early(Circuit& c, FetchDecode& fd, int k) {
  QGPU_RETURN_IF_ERROR(check_slot(fd, k));
  Word lo;
  Word hi;
  for (int h = 0; h < 2; ++h) {
    const std::string name = "s" + std::to_string(k) + "e" + (h ? ".hi" : ".lo");
    auto rd = c.ram_read(fd.rams[static_cast<std::size_t>(2 * k + h)], "fetch." + name, fd.exec_block, fd.exec_is[0]);
    if (!rd) return rd.status();
    (h ? hi : lo) = std::move(*rd);
  }
  const std::string owner = "decode.s" + std::to_string(k) + "e";
  const Op ops[] = {Op::kBr, Op::kBrc, Op::kBar, Op::kExit};
  constexpr int kTargetBits = kProtoBlockBits;
  auto op = c.computed(owner, "opcode", 4);
  if (!op) return op.status();
  auto tg = c.computed(owner, "targets", 2 * kTargetBits);
  if (!tg) return tg.status();
  const Affine one{{}, 1};
  c.push_enable(fd.exec_is[0]);
  MlpBuilder mb(c);
  for (int i = 0; i < 4; ++i)
    mb.select(weights::spells(slice(lo, 0, kOpcodeBits), static_cast<unsigned>(ops[i])), one, {Term{(*op)[i], 1}});
  for (int i = 0; i < kTargetBits; ++i) {
    mb.select({hi[i]}, one, {Term{(*tg)[i], 1}});
    mb.select({hi[16 + i]}, one, {Term{(*tg)[kTargetBits + i], 1}});
  }
  sdk::Status st = mb.commit(owner);
  c.pop_enable();
  QGPU_RETURN_IF_ERROR(st);
  TermEarly t;
  t.opcode = Word(kOpCount, c.zero());
  for (int i = 0; i < 4; ++i) t.opcode[static_cast<std::size_t>(ops[i])] = (*op)[i];
  t.imm = Word(32, c.zero());
  for (int i = 0; i < kTargetBits; ++i) {
    t.imm[static_cast<std::size_t>(i)] = (*tg)[i];
    t.imm[static_cast<std::size_t>(16 + i)] = (*tg)[kTargetBits + i];
  }
  return t;
}

sdk::Expected<TokenInputs> token_inputs(const FetchDecode& fd, const Record& r) {
  auto ids = record_token_ids(fd.records, r);
  if (!ids) return ids.status();
  if (ids->size() != 1)
    return sdk::invalid_argument(to_text(r) + " is " + std::to_string(ids->size()) +
                                 " tokens (a header and its DATA): feed each token id (records.h record_inputs)");
  return token_inputs(fd.records, ids->front());
}

}  // namespace qgpu::simt::circuit
