#include "choice.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "names.h"

namespace qgpu::simt::circuit {
namespace {

void push_field(TokenBits& out, const Word& w, std::uint32_t v) {
  for (std::size_t i = 0; i < w.size(); ++i) out.bits.emplace_back(w[i], ((v >> i) & 1) != 0);
}

}  // namespace

sdk::Status mark_choice_outputs(weights::Circuit& c, const NextToken& n) {
  return c.mark_output(choice_bits(n));
}

bool generated_token_bits(const NextToken& n, std::int64_t offset, TokenBits& out) {
  out.bits.clear();
  out.kind_weight = 1;
  auto rec = token_record(offset);
  if (!rec) return false;
  const Record& r = *rec;
  switch (r.kind) {
    case RecordKind::kHalt: out.bits.emplace_back(n.halt, true); return true;
    case RecordKind::kSync: out.bits.emplace_back(n.sync, true); return true;
    case RecordKind::kCta:
      out.bits.emplace_back(n.cta, true);
      push_field(out, n.cta_index, r.cta);
      return true;
    case RecordKind::kExec:
      out.bits.emplace_back(n.exec, true);
      push_field(out, n.exec_block, r.block);
      push_field(out, n.warp, r.warp);
      push_field(out, n.exec_lanes, r.lanes);
      return true;
    case RecordKind::kSched:
      out.bits.emplace_back(n.sched, true);
      push_field(out, n.warp, r.warp);
      push_field(out, n.sched_lanes, r.lanes);
      push_field(out, n.sched_status, static_cast<std::uint32_t>(r.status));
      push_field(out, n.sched_block, r.block);
      return true;
    case RecordKind::kWreg:
      if (data_tokens(r) > kMaxDataTokens) return false;  // reserved row
      out.bits.emplace_back(n.wreg, true);
      push_field(out, n.warp, r.warp);
      push_field(out, n.wreg_reg, r.reg);
      push_field(out, n.wreg_lanes, r.lanes);
      push_field(out, n.wreg_format, static_cast<std::uint32_t>(r.format));
      return true;
    case RecordKind::kWmem:
      if (data_tokens(r) > kMaxDataTokens) return false;  // reserved row
      out.bits.emplace_back(n.wmem, true);
      out.bits.emplace_back(n.wmem_shared, r.shared);
      push_field(out, n.wmem_word, r.word);
      push_field(out, n.wmem_count, r.count);
      push_field(out, n.wmem_format, static_cast<std::uint32_t>(r.format));
      return true;
    case RecordKind::kData:
      out.bits.emplace_back(n.data, true);
      push_field(out, n.data_value, r.data);
      return true;
    case RecordKind::kFault:
      if (n.fault.field <= 0 || r.slot >= 1u << n.fault_slot.size()) return false;  // no fault input (unset or 0)
      out.kind_weight = 2;
      out.bits.emplace_back(n.fault, true);
      push_field(out, n.fault_slot, r.slot);
      push_field(out, n.fault_lane, r.lane);
      out.bits.emplace_back(n.fault_kind, r.fault == FaultKind::kOutOfBounds);
      return true;
    default: return false;  // fed by the host only
  }
}

sdk::Expected<weights::SparseMatrix> record_unembedding(const NextToken& next, const weights::Allocation& a,
                                                        double alpha) {
  int e = 0;
  if (!(alpha > 0) || std::frexp(alpha, &e) != 0.5)
    return sdk::invalid_argument("record unembedding: alpha " + std::to_string(alpha) + " is not a power of two");
  const std::int64_t rows = vocabulary_rows();
  if (next.one.field == 0 || next.one.neg) return sdk::internal_error("record unembedding: NextToken::one is not a field");
  const int one = a.channel(next.one);
  weights::SparseBuilder m(rows, a.hidden_size);
  TokenBits tb;
  for (std::int64_t t = 0; t < rows; ++t) {
    if (!generated_token_bits(next, t, tb)) {
      m.add(t, one, -alpha * 2 * kChoiceKindWeight);
      continue;
    }
    const auto n = static_cast<double>(tb.bits.size() - 1);  // field bits (the kind bit is first)
    if (n >= kChoiceKindWeight) return sdk::internal_error("record unembedding: a kind has more field bits than W");
    double bias = -alpha * n;
    const auto term = [&](Bit bit, double w) {
      const weights::BitRead r = weights::read_bit(a, bit, w);
      m.add(t, r.channel, r.weight);
      bias += r.bias;
    };
    term(tb.bits[0].first, alpha * kChoiceKindWeight * tb.kind_weight);
    for (std::size_t i = 1; i < tb.bits.size(); ++i) {
      const auto& [bit, value] = tb.bits[i];
      term(value ? bit : !bit, alpha);
    }
    if (bias != 0) m.add(t, one, bias);
  }
  return m.build();
}

}  // namespace qgpu::simt::circuit
