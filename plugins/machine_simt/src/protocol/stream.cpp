// --check: the first token where a generated stream leaves the expected one, named by record.
#include <cstdio>

#include "protocol.h"

namespace qgpu::simt {

namespace {

// A header's fields without its payload, e.g. "WREG w0 r1 0b0111 byte".
std::string header_text(const Record& r) {
  Record h = r;
  h.values = {};
  std::string text = to_text(h);
  if (const auto cut = text.find(" ["); cut != std::string::npos) text.resize(cut);
  return text;
}

// One token of a stream by itself, e.g. "EXEC B1 w0 0b0111 (id 248578)", "DATA 0x0402 (id 288078)".
std::string token_text(std::int64_t id, std::int64_t base) {
  const std::string tail = " (id " + std::to_string(id) + ")";
  if (id < base) return "a text token" + tail;
  auto r = token_record(id - base);
  if (!r) return "an invalid machine row" + tail;
  if (r->kind != RecordKind::kData) return header_text(*r) + tail;
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%04x", r->data);
  return std::string("DATA ") + hex + tail;
}

}  // namespace

std::string StreamMismatch::to_string() const {
  return "token " + std::to_string(token) + " (record " + std::to_string(record) + "): expected " + expected +
         ", got " + got;
}

std::optional<StreamMismatch> first_mismatch(std::span<const std::int64_t> expected,
                                             std::span<const std::int64_t> got, std::int64_t base) {
  std::size_t record = 0, record_start = 0;
  for (std::size_t i = 0; i < expected.size() || i < got.size(); ++i) {
    // Track which expected record token i belongs to (header + its DATA tokens).
    std::string where;  // for an expected DATA token: "DATA 2 of 3 of WREG w0 r1 0b0111 byte: "
    if (i < expected.size()) {
      auto r = token_record(expected[i] - base);
      if (r && r->kind != RecordKind::kData) {
        if (i > 0) ++record;
        record_start = i;
      } else if (r) {
        auto head = token_record(expected[record_start] - base);
        if (head && head->kind != RecordKind::kData)
          where = "DATA " + std::to_string(i - record_start) + " of " + std::to_string(data_tokens(*head)) + " of " +
                  header_text(*head) + ": ";
      }
    }
    const bool have_e = i < expected.size(), have_g = i < got.size();
    if (have_e && have_g && expected[i] == got[i]) continue;
    StreamMismatch m;
    m.token = i;
    m.record = have_e ? record : record + 1;
    m.expected = have_e ? where + token_text(expected[i], base) : "the end of the stream";
    m.got = have_g ? token_text(got[i], base) : "nothing (the stream ended)";
    return m;
  }
  return std::nullopt;
}

}  // namespace qgpu::simt
