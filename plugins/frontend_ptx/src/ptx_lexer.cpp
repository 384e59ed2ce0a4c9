#include "ptx_lexer.h"

#include <cctype>
#include <charconv>

namespace qgpu::ptx {
namespace {

bool is_word_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%' || c == '.';
}
bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
}

}  // namespace

bool lex(std::string_view text, const DiagnosticFiles& files, std::vector<Token>& out, sdk::Status& error) {
  std::uint32_t line = 1, col = 1;
  std::size_t i = 0;
  auto advance = [&](std::size_t n) {
    for (std::size_t k = 0; k < n && i < text.size(); ++k, ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      advance(1);
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') advance(1);
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const SrcLoc start{line, col};
      std::size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) {
        error = ptx_diagnostic(files, start, {}, sdk::ErrorCode::kParseError, "unterminated /* comment");
        return false;
      }
      advance(end + 2 - i);
      continue;
    }
    Token t;
    t.loc = {line, col};
    std::size_t start = i;
    if (std::isdigit(static_cast<unsigned char>(c))) {
      t.kind = Token::Kind::kNumber;
      while (i < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == '_')) {
        advance(1);
      }
    } else if (is_word_start(c)) {
      t.kind = Token::Kind::kWord;
      advance(1);
      while (i < text.size() && is_word_char(text[i])) advance(1);
    } else if (c == '"') {
      t.kind = Token::Kind::kString;
      advance(1);
      while (i < text.size() && text[i] != '"' && text[i] != '\n') advance(1);
      if (i >= text.size() || text[i] != '"') {
        error = ptx_diagnostic(files, t.loc, {}, sdk::ErrorCode::kParseError, "unterminated string");
        return false;
      }
      advance(1);
    } else if (std::string_view(",;:[](){}<>+-@!|=").find(c) != std::string_view::npos) {
      t.kind = Token::Kind::kPunct;
      advance(1);
    } else {
      error = ptx_diagnostic(files, t.loc, {}, sdk::ErrorCode::kParseError,
                             std::string("unexpected character '") + c + "'");
      return false;
    }
    t.text = std::string(text.substr(start, i - start));
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Token::Kind::kEnd;
  end.loc = {line, col};
  out.push_back(end);
  return true;
}

bool parse_int_literal(std::string_view s, std::int64_t& value) {
  if (!s.empty() && (s.back() == 'U' || s.back() == 'u')) s.remove_suffix(1);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    base = 2;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  std::uint64_t u = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), u, base);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return false;
  value = static_cast<std::int64_t>(u);
  return true;
}

std::int64_t negate(std::int64_t v) {
  return static_cast<std::int64_t>(0 - static_cast<std::uint64_t>(v));
}

}  // namespace qgpu::ptx
