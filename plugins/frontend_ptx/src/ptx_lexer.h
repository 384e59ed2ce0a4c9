// PTX lexer: text to tokens (comments dropped, positions kept for diagnostics), and the
// integer-literal reading the parser shares.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptx_ast.h"

namespace qgpu::ptx {

struct Token {
  enum class Kind : std::uint8_t { kWord, kNumber, kString, kPunct, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  SrcLoc loc;
};

// Splits PTX text into tokens, ending with a kEnd token; comments are dropped. Returns false (with
// `error` set, at the PTX or CUDA line) on a bad character, an unterminated comment or string.
bool lex(std::string_view text, const DiagnosticFiles& files, std::vector<Token>& out, sdk::Status& error);

// Parses a PTX integer literal: decimal, 0x hex, 0b binary, 0 octal, optional U suffix.
bool parse_int_literal(std::string_view s, std::int64_t& value);

// -v in 64-bit two's complement, as PTX reads a negated literal: -0x8000000000000000 is INT64_MIN (a
// plain `-v` would overflow there).
std::int64_t negate(std::int64_t v);

}  // namespace qgpu::ptx
