// The expression language's recursive-descent parser (grammar: docs/GPU_TOOL.md). One function per
// rule; every error is one line pointing at the line and column where the input went wrong.
#include <algorithm>
#include <cctype>
#include <charconv>

#include "qgpu/core/gpu_expression.h"
#include "qgpu/core/text.h"

namespace qgpu::core {
namespace {

using Expr = GpuExpression;

// Bounds that keep the recursive parts (this parser, to_string, the evaluator, the tree's destructor)
// far from the stack's end on any input: parentheses and calls nest at most kMaxNesting deep, and an
// expression holds at most kMaxOperations operators and calls (each is one launch), which also bounds
// the tree's depth. Both are far beyond anything written by hand or by the chat's model.
constexpr int kMaxNesting = 256;
constexpr int kMaxOperations = 1000;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  // expression-text := expression end
  sdk::Expected<Expr> parse() {
    auto e = expression();
    if (!e) return e;
    skip_space();
    if (!at_end()) return error("unexpected " + quote_here() + " after a complete expression");
    return e;
  }

 private:
  // expression := term (('+' | '-') term)*
  sdk::Expected<Expr> expression() { return binary_chain("+-", &Parser::term); }

  // term := primary (('*' | '@') primary)*
  sdk::Expected<Expr> term() { return binary_chain("*@", &Parser::primary); }

  sdk::Expected<Expr> binary_chain(std::string_view ops, sdk::Expected<Expr> (Parser::*operand)()) {
    auto left = (this->*operand)();
    if (!left) return left;
    for (;;) {
      skip_space();
      if (at_end() || ops.find(peek()) == std::string_view::npos) return left;
      Expr e;
      e.kind = Expr::Kind::kBinary;
      e.line = line();
      e.column = column();
      e.name = std::string(1, peek());
      if (auto s = count_operation(); !s) return s;
      ++pos_;
      auto right = (this->*operand)();
      if (!right) return right;
      e.operands.push_back(std::move(*left));
      e.operands.push_back(std::move(*right));
      *left = std::move(e);
    }
  }

  // primary := integer | array | call | '(' expression ')'
  sdk::Expected<Expr> primary() {
    skip_space();
    if (at_end()) return error("expected a value, got the end of the expression");
    const char c = peek();
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
      if (c == '-' && !(pos_ + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_ + 1]))))
        return error("'-' in front of a value is only allowed on an integer (write 0 - x)");
      Expr e;
      e.line = line();
      e.column = column();
      auto v = integer();
      if (!v) return v.error();
      e.literal = GpuValue::scalar(*v);
      return e;
    }
    if (c == '[') return array();
    if (c == '(') {
      if (auto s = enter(); !s) return s;
      ++pos_;
      auto e = expression();
      if (!e) return e;
      if (auto s = expect(')'); !s) return s;
      --nesting_;
      return e;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return call();
    return error("expected a value (an integer, '[', '(' or a function), got " + quote_here());
  }

  // integer := '-'? digit+   (an int32)
  sdk::Expected<std::int32_t> integer() {
    skip_space();
    const std::size_t start = pos_;
    if (!at_end() && peek() == '-') ++pos_;
    if (at_end() || !std::isdigit(static_cast<unsigned char>(peek()))) {
      pos_ = start;
      return error("expected an integer, got " + quote_here());
    }
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
    const std::string_view digits = text_.substr(start, pos_ - start);
    std::int32_t v = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || ptr != digits.data() + digits.size()) {
      pos_ = start;
      return error("integer " + std::string(digits) + " is outside int32 [-2147483648, 2147483647]");
    }
    return v;
  }

  // array := '[' integer (',' integer)* ']'  |  '[' row (',' row)* ']'  with row := '[' integer (',' integer)* ']'
  sdk::Expected<Expr> array() {
    Expr e;
    e.line = line();
    e.column = column();
    ++pos_;  // '['
    skip_space();
    if (at_end() || peek() != '[') {
      auto v = integers();
      if (!v) return v.error();
      e.literal = GpuValue::vector(std::move(*v));
      return e;
    }
    std::vector<std::int32_t> data;
    std::int64_t rows = 0, cols = 0;
    for (;;) {
      skip_space();
      const int row_column = column();
      if (auto s = expect('['); !s) return s;
      auto row = integers();
      if (!row) return row.error();
      if (rows == 0) cols = static_cast<std::int64_t>(row->size());
      if (static_cast<std::int64_t>(row->size()) != cols)
        return error_at_column(row_column, "matrix row " + std::to_string(rows + 1) + " has " +
                                               std::to_string(row->size()) + " elements, row 1 has " +
                                               std::to_string(cols));
      data.insert(data.end(), row->begin(), row->end());
      ++rows;
      if (accept(',')) continue;
      if (auto s = expect(']', "',' or ']'"); !s) return s;
      break;
    }
    e.literal = GpuValue::matrix(rows, cols, std::move(data));
    return e;
  }

  // The integers of a vector after its '[', through its ']'.
  sdk::Expected<std::vector<std::int32_t>> integers() {
    std::vector<std::int32_t> values;
    for (;;) {
      auto v = integer();
      if (!v) return v.error();
      values.push_back(*v);
      if (accept(',')) continue;
      if (auto s = expect(']', "',' or ']'"); !s) return s;
      return values;
    }
  }

  // call := name '(' (expression (',' expression)*)? ')'
  sdk::Expected<Expr> call() {
    Expr e;
    e.kind = Expr::Kind::kCall;
    e.line = line();
    e.column = column();
    if (auto s = count_operation(); !s) return s;
    const std::size_t start = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) ++pos_;
    e.name = std::string(text_.substr(start, pos_ - start));
    const GpuFunction* function = nullptr;
    std::vector<std::string> names;
    for (const auto& f : gpu_functions()) {
      names.emplace_back(f.name);
      if (f.name == e.name) function = &f;
    }
    if (function == nullptr) {
      std::string message = "unknown function '" + e.name + "'";
      if (std::string hint = closest_match(e.name, names); !hint.empty()) message += " (did you mean '" + hint + "'?)";
      return error(e, message + "; functions: " + join(names));
    }
    if (auto s = enter(); !s) return s;
    if (auto s = expect('(', "'(' after '" + e.name + "'"); !s) return s;
    if (!accept(')')) {
      for (;;) {
        auto arg = expression();
        if (!arg) return arg;
        e.operands.push_back(std::move(*arg));
        if (accept(',')) continue;
        if (auto s = expect(')', "',' or ')'"); !s) return s;
        break;
      }
    }
    --nesting_;
    if (e.operands.size() != function->params.size()) {
      std::vector<std::string> params(function->params.begin(), function->params.end());
      return error(e, e.name + "(" + join(params) + ") takes " + std::to_string(params.size()) + " argument" +
                          (params.size() == 1 ? "" : "s") + ", got " + std::to_string(e.operands.size()));
    }
    return e;
  }

  // One more '(' or call open at the current position.
  sdk::Status enter() {
    if (++nesting_ > kMaxNesting)
      return error("parentheses and calls nest more than " + std::to_string(kMaxNesting) + " deep");
    return sdk::Status::ok();
  }
  // One more operator or call (at the current position).
  sdk::Status count_operation() {
    if (++operations_ > kMaxOperations)
      return error("the expression has more than " + std::to_string(kMaxOperations) + " operations");
    return sdk::Status::ok();
  }

  // Consumes `c` (after spaces) if it is next.
  bool accept(char c) {
    skip_space();
    if (at_end() || peek() != c) return false;
    ++pos_;
    return true;
  }

  sdk::Status expect(char c, const std::string& what = "") {
    if (accept(c)) return sdk::Status::ok();
    return error("expected " + (what.empty() ? std::string("'") + c + "'" : what) + ", got " + quote_here());
  }

  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(peek()))) ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  std::string quote_here() const { return at_end() ? "the end of the expression" : "'" + std::string(1, peek()) + "'"; }
  // 1-based column of pos_ on its line.
  int column() const {
    seek();
    return static_cast<int>(pos_ - where_.line_start + 1);
  }
  int line() const {
    seek();
    return where_.line;
  }
  // Moves the cached line position to pos_: forward from the cache (pos_ only steps back a few
  // characters, inside a literal), so locating every token costs linear time in all.
  void seek() const {
    if (pos_ < where_.pos) where_ = Where{};
    const std::size_t end = std::min(pos_, text_.size());
    for (; where_.pos < end; ++where_.pos) {
      if (text_[where_.pos] == '\n') {
        ++where_.line;
        where_.line_start = where_.pos + 1;
      }
    }
  }
  sdk::Status error(const std::string& message) const { return error_at_column(column(), message); }
  sdk::Status error(const Expr& at, const std::string& message) const {
    return sdk::error_at(location_of(at), sdk::ErrorCode::kParseError, message);
  }
  sdk::Status error_at_column(int col, const std::string& message) const {
    return sdk::error_at("expression:" + std::to_string(line()) + ":" + std::to_string(col),
                         sdk::ErrorCode::kParseError, message);
  }

  struct Where {
    std::size_t pos = 0;         // the cache is valid for this position
    int line = 1;                // 1-based line of pos
    std::size_t line_start = 0;  // offset of that line's first character
  };

  std::string_view text_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
  int operations_ = 0;
  mutable Where where_;
};

}  // namespace

sdk::Expected<GpuExpression> parse_gpu_expression(std::string_view text) {
  return Parser(text).parse();
}

std::string location_of(const GpuExpression& e) {
  return "expression:" + std::to_string(e.line) + ":" + std::to_string(e.column);
}

std::string to_string(const GpuExpression& e) {
  if (e.kind == GpuExpression::Kind::kLiteral) return format_value(e.literal);
  std::string s = "(" + e.name;
  for (const auto& operand : e.operands) s += " " + to_string(operand);
  return s + ")";
}

}  // namespace qgpu::core
