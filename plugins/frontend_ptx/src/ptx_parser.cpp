// PTX recursive-descent parser (see ptx_ast.h) over the lexer's tokens (ptx_lexer.h).
//
// The grammar covered is the part of PTX that clang-16 and nvcc emit for
// integer kernels, plus what people write by hand. Instruction semantics are
// not checked here; the MLIR builder does that with the same diagnostics.
#include <cctype>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ptx_ast.h"
#include "ptx_lexer.h"
#include "source_names.h"

namespace qgpu::ptx {

std::string format_loc(const std::string& path, SrcLoc loc) {
  return path + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

sdk::Status ptx_diagnostic(const DiagnosticFiles& files, SrcLoc ptx_at, SrcLoc cuda_at, sdk::ErrorCode code,
                           const std::string& message) {
  if (!files.cuda.empty() && cuda_at.line > 0) {
    const std::string ptx = files.ptx_on_disk ? " (generated PTX: " + format_loc(files.ptx, ptx_at) + ")" : "";
    return sdk::error_at(format_loc(files.cuda, cuda_at), code, message + ptx);
  }
  if (!files.ptx_on_disk) {
    return sdk::error_at(files.cuda, code,
                         message + " (line " + std::to_string(ptx_at.line) + ":" + std::to_string(ptx_at.column) +
                             " of the PTX clang generated; frontend option keep_ptx: DIR writes it to DIR)");
  }
  return sdk::error_at(format_loc(files.ptx, ptx_at), code, message);
}

namespace {

// Registers one kernel may declare, over all its .reg lines, ranges expanded: a bound on the parser's
// memory and time (a 1 KB file of `.reg .b32 %rN<1048576>;` lines took gigabytes and minutes before).
constexpr std::int64_t kMaxRegisters = 1 << 16;

class Parser {
 public:
  Parser(std::vector<Token> tokens, DiagnosticFiles files)
      : toks_(std::move(tokens)), path_(files.ptx), files_(std::move(files)) {}

  sdk::Expected<Module> run() {
    Module m;
    m.path = path_;
    m.diag = files_;
    find_cuda_file(m);
    if (!refuse_calls()) return status_;
    if (!parse_module(m)) return status_;
    return m;
  }

 private:
  const Token& peek(std::size_t ahead = 0) const {
    std::size_t k = std::min(pos_ + ahead, toks_.size() - 1);
    return toks_[k];
  }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at_punct(char c) const { return peek().kind == Token::Kind::kPunct && peek().text[0] == c; }
  bool at_word(std::string_view w) const { return peek().kind == Token::Kind::kWord && peek().text == w; }

  // Inside a kernel of CUDA input, the error points at the CUDA line of the latest .loc of the .cu file.
  bool fail(SrcLoc loc, const std::string& message, sdk::ErrorCode code = sdk::ErrorCode::kParseError) {
    if (status_.is_ok()) status_ = ptx_diagnostic(files_, loc, in_entry_ ? last_cuda_ : SrcLoc{}, code, message);
    return false;
  }

  // `.file N "path"` lines come after the code in clang's PTX: read them first, so that errors anywhere
  // can point at the CUDA file's lines.
  void find_cuda_file(Module& m) {
    for (std::size_t i = 0; i + 2 < toks_.size(); ++i) {
      std::int64_t n = 0;
      if (toks_[i].kind != Token::Kind::kWord || toks_[i].text != ".file" ||
          toks_[i + 1].kind != Token::Kind::kNumber || !parse_int_literal(toks_[i + 1].text, n) ||
          toks_[i + 2].kind != Token::Kind::kString) {
        continue;
      }
      const std::string& q = toks_[i + 2].text;
      const std::string file = q.substr(1, q.size() - 2);
      std::error_code ec;
      if (!files_.cuda.empty() && (file == files_.cuda || std::filesystem::equivalent(file, files_.cuda, ec)))
        cuda_file_ = static_cast<int>(n);
    }
    m.cuda_file = cuda_file_;
  }

  // A kernel that calls anything is refused before parsing: the call is the cause, and what comes with
  // it (.param declarations in the kernel, printf's .local buffer and .global format string) would
  // otherwise be reported first, as syntax the user never wrote.
  bool refuse_calls() {
    enum class Region : std::uint8_t { kNone, kEntry, kFunc };
    Region pending = Region::kNone, region = Region::kNone;
    int depth = 0;
    std::set<std::string> defined;  // .func with a body in this file
    std::string pending_func;
    struct Call {
      std::string callee;
      SrcLoc at, cuda_at;
    };
    std::vector<Call> calls;
    SrcLoc cuda_at;
    for (std::size_t i = 0; i < toks_.size(); ++i) {
      const Token& t = toks_[i];
      if (t.kind == Token::Kind::kPunct && t.text == "{") {
        if (depth++ == 0) {
          region = pending;
          if (region == Region::kFunc) defined.insert(pending_func);
          if (region == Region::kEntry) cuda_at = {};
          pending = Region::kNone;
        }
      } else if (t.kind == Token::Kind::kPunct && t.text == "}") {
        if (depth > 0 && --depth == 0) region = Region::kNone;
      } else if (t.kind == Token::Kind::kPunct && t.text == ";") {
        if (depth == 0) pending = Region::kNone;  // the end of a declaration (.extern .func f(...);)
      } else if (t.kind != Token::Kind::kWord) {
        continue;
      } else if (depth == 0 && t.text == ".entry") {
        pending = Region::kEntry;
      } else if (depth == 0 && t.text == ".func") {
        pending = Region::kFunc;
        // .func [(.param ... retval)] name(...)
        std::size_t k = i + 1;
        if (k < toks_.size() && toks_[k].text == "(") k = skip_group(k);
        pending_func = k < toks_.size() ? toks_[k].text : "";
      } else if (depth == 0 && (t.text == ".section" || t.text == ".global" || t.text == ".const")) {
        pending = Region::kNone;
      } else if (t.text == ".loc" && i + 3 < toks_.size()) {
        std::int64_t f = 0, l = 0, c = 0;
        if (parse_int_literal(toks_[i + 1].text, f) && parse_int_literal(toks_[i + 2].text, l) &&
            parse_int_literal(toks_[i + 3].text, c) && f == cuda_file_ && cuda_file_ >= 0 && l > 0) {
          cuda_at = {static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(c)};
        }
      } else if (region == Region::kEntry && (t.text == "call" || t.text.starts_with("call."))) {
        // call[.uni] [(ret),] callee[, (args)][, prototype];
        std::size_t k = i + 1;
        if (k < toks_.size() && toks_[k].text == "(") {
          k = skip_group(k);
          if (k < toks_.size() && toks_[k].text == ",") ++k;
        }
        calls.push_back({k < toks_.size() ? toks_[k].text : "", t.loc, cuda_at});
      }
    }
    if (calls.empty()) return true;
    const Call& c = calls.front();
    std::string message;
    if (c.callee == "vprintf") {
      message =
          "device printf is not supported (PTX calls vprintf): the machine has no output stream; store the "
          "values in an output array and print them on the host";
    } else if (c.callee.starts_with("%")) {
      message = "indirect call (a function pointer) is not supported: the machine runs fully inlined kernels";
    } else if (defined.count(c.callee)) {
      message = "device function '" + function_name(c.callee) +
                "' was not inlined (a PTX call with .param arguments): the machine runs fully inlined kernels; "
                "declare it __forceinline__ (not __noinline__, and not recursive)";
    } else {
      message = "call to external device function '" + function_name(c.callee) +
                "' is not supported: the machine runs fully inlined kernels and has no device library";
    }
    in_entry_ = true;
    last_cuda_ = c.cuda_at;
    fail(c.at, message, sdk::ErrorCode::kUnsupported);
    in_entry_ = false;
    return false;
  }

  // The index after the balanced (...) group that starts at toks_[open].
  std::size_t skip_group(std::size_t open) const {
    int d = 0;
    for (std::size_t k = open; k < toks_.size(); ++k) {
      if (toks_[k].kind != Token::Kind::kPunct) continue;
      if (toks_[k].text == "(") ++d;
      if (toks_[k].text == ")" && --d == 0) return k + 1;
    }
    return toks_.size();
  }
  std::string describe(const Token& t) const {
    if (t.kind == Token::Kind::kEnd) return "end of file";
    return "'" + t.text + "'";
  }
  bool expect_punct(char c) {
    if (at_punct(c)) {
      next();
      return true;
    }
    return fail(peek().loc, std::string("expected '") + c + "', found " + describe(peek()));
  }
  bool expect_word(std::string& out, const char* what) {
    if (peek().kind != Token::Kind::kWord)
      return fail(peek().loc, std::string("expected ") + what + ", found " + describe(peek()));
    out = next().text;
    return true;
  }
  bool expect_int(std::int64_t& out) {
    bool neg = false;
    if (at_punct('-')) {
      next();
      neg = true;
    }
    const Token& t = peek();
    if (t.kind != Token::Kind::kNumber) return fail(t.loc, "expected an integer, found " + describe(t));
    if (!parse_int_literal(t.text, out)) return fail(t.loc, "invalid integer literal '" + t.text + "'");
    next();
    if (neg) out = negate(out);
    return true;
  }
  // Skips the rest of the source line of the token just consumed (line-oriented directives).
  void skip_line(std::uint32_t line) {
    while (peek().kind != Token::Kind::kEnd && peek().loc.line == line) next();
  }
  void skip_past_semicolon() {
    while (peek().kind != Token::Kind::kEnd && !at_punct(';')) next();
    if (at_punct(';')) next();
  }

  // Skips a balanced { ... } starting at the current '{'; false at end of file.
  bool skip_braces() {
    int depth = 0;
    while (peek().kind != Token::Kind::kEnd) {
      const Token& t = next();
      if (t.kind == Token::Kind::kPunct && t.text == "{") ++depth;
      if (t.kind == Token::Kind::kPunct && t.text == "}" && --depth == 0) return true;
    }
    return false;
  }

  // Device functions are skipped: clang keeps a body for every non-static __device__ function even
  // when it inlined all calls. A kernel that still calls one is rejected at its 'call'.
  void skip_function() {
    next();  // .func
    int parens = 0;
    while (peek().kind != Token::Kind::kEnd) {
      if (at_punct('(')) ++parens;
      if (at_punct(')')) --parens;
      if (parens == 0 && at_punct(';')) {
        next();  // a declaration
        return;
      }
      if (parens == 0 && at_punct('{')) {
        skip_braces();
        return;
      }
      next();
    }
  }

  bool parse_module(Module& m) {
    while (peek().kind != Token::Kind::kEnd) {
      const Token& t = peek();
      if (t.kind != Token::Kind::kWord || t.text[0] != '.')
        return fail(t.loc, "expected a directive, found " + describe(t));
      const std::string d = t.text;
      const SrcLoc loc = t.loc;
      if (d == ".file") {
        next();
        std::int64_t n = 0;
        if (peek().kind == Token::Kind::kNumber && parse_int_literal(peek().text, n)) {
          next();
          if (peek().kind == Token::Kind::kString) {
            const std::string& q = peek().text;
            m.files[static_cast<int>(n)] = q.substr(1, q.size() - 2);
          }
        }
        skip_line(loc.line);
      } else if (d == ".version" || d == ".target" || d == ".address_size" || d == ".loc") {
        next();
        skip_line(loc.line);
      } else if (d == ".pragma") {
        next();
        skip_past_semicolon();
      } else if (d == ".func") {
        skip_function();
      } else if (d == ".visible" || d == ".weak" || d == ".entry") {
        next();
        if (d != ".entry") {
          if (at_word(".func")) {
            skip_function();
            continue;
          }
          if (!at_word(".entry"))
            return fail(peek().loc, "expected '.entry' after '" + d + "', found " + describe(peek()));
          next();
        }
        Entry e;
        e.loc = loc;
        if (!parse_entry(e)) return false;
        m.entries.push_back(std::move(e));
      } else if (d == ".shared") {
        SharedDecl s;
        if (!parse_shared(s)) return false;
        m.shared.push_back(std::move(s));
      } else if (d == ".extern") {
        next();
        if (at_word(".shared"))
          return fail(loc, "unsupported directive '.extern .shared' (dynamic shared memory)",
                      sdk::ErrorCode::kUnsupported);
        if (at_word(".func")) {
          skip_function();
          continue;
        }
        return fail(loc, "unsupported directive '.extern'", sdk::ErrorCode::kUnsupported);
      } else if (d == ".section") {
        // Debug information (nvcc -lineinfo, clang -g): data only, skipped.
        next();
        while (peek().kind != Token::Kind::kEnd && !at_punct('{')) next();
        if (!skip_braces()) return fail(loc, "unterminated '.section'");
      } else if (d == ".global" || d == ".const") {
        return fail(loc, "unsupported directive '" + d + "' (device variables; clang emits them at -O0)",
                    sdk::ErrorCode::kUnsupported);
      } else {
        return fail(loc, "unsupported directive '" + d + "'", sdk::ErrorCode::kUnsupported);
      }
    }
    return true;
  }

  bool parse_entry(Entry& e) {
    dbg_file_ = -1;
    last_cuda_ = {};
    declared_regs_ = 0;
    in_entry_ = true;
    const bool ok = parse_entry_body(e);
    in_entry_ = false;
    return ok;
  }

  bool parse_entry_body(Entry& e) {
    if (!expect_word(e.name, "a kernel name")) return false;
    if (at_punct('(')) {
      next();
      while (!at_punct(')')) {
        if (!e.params.empty() && !expect_punct(',')) return false;
        ParamDecl p;
        p.loc = peek().loc;
        if (!at_word(".param")) return fail(peek().loc, "expected '.param', found " + describe(peek()));
        next();
        std::string type;
        if (!expect_word(type, "a parameter type")) return false;
        if (type == ".align") {
          return fail(p.loc, "unsupported parameter (by-value structs and arrays are not supported)",
                      sdk::ErrorCode::kUnsupported);
        }
        p.type = type.substr(1);
        // Optional pointer attributes (.ptr .global .align N) describe what a u64 points to.
        while (peek().kind == Token::Kind::kWord && peek().text[0] == '.') {
          std::string attr = next().text;
          if (attr == ".align" || attr.ends_with(".align")) {
            std::int64_t ignored = 0;
            if (!expect_int(ignored)) return false;
          }
        }
        if (!expect_word(p.name, "a parameter name")) return false;
        if (at_punct('['))
          return fail(peek().loc, "unsupported parameter (arrays are not supported)", sdk::ErrorCode::kUnsupported);
        e.params.push_back(std::move(p));
      }
      next();
    }
    // Performance directives between the parameter list and the body.
    while (!at_punct('{')) {
      const Token& t = peek();
      if (t.kind != Token::Kind::kWord) return fail(t.loc, "expected '{', found " + describe(t));
      if (t.text == ".maxntid" || t.text == ".reqntid" || t.text == ".minnctapersm" || t.text == ".maxnctapersm" ||
          t.text == ".maxnreg" || t.text == ".maxclusterrank" || t.text == ".reqnctapercluster") {
        next();
        std::int64_t v = 0;
        if (!expect_int(v)) return false;
        while (at_punct(',')) {
          next();
          if (!expect_int(v)) return false;
        }
      } else if (t.text == ".noreturn" || t.text == ".explicitcluster") {
        next();
      } else if (t.text == ".pragma") {
        next();
        skip_past_semicolon();
      } else {
        return fail(t.loc, "unsupported directive '" + t.text + "'", sdk::ErrorCode::kUnsupported);
      }
    }
    next();  // '{'
    int depth = 1;
    while (true) {
      const Token& t = peek();
      if (t.kind == Token::Kind::kEnd) return fail(t.loc, "unexpected end of file inside kernel '" + e.name + "'");
      if (t.kind == Token::Kind::kPunct && t.text == "{") {
        next();
        ++depth;
        continue;
      }
      if (t.kind == Token::Kind::kPunct && t.text == "}") {
        next();
        if (--depth == 0) return true;
        continue;
      }
      if (!parse_statement(e)) return false;
    }
  }

  bool parse_shared(SharedDecl& s) {
    s.loc = peek().loc;
    next();  // .shared
    std::uint32_t elem = 0;
    while (peek().kind == Token::Kind::kWord && peek().text[0] == '.') {
      const Token t = next();
      if (t.text == ".align") {
        std::int64_t a = 0;
        if (!expect_int(a)) return false;
        if (a <= 0 || a > 4096 || (a & (a - 1)) != 0) return fail(t.loc, "invalid alignment " + std::to_string(a));
        s.align = static_cast<std::uint32_t>(a);
      } else {
        const std::string ty = t.text.substr(1);
        if (ty == "b8" || ty == "u8" || ty == "s8")
          elem = 1;
        else if (ty == "b16" || ty == "u16" || ty == "s16")
          elem = 2;
        else if (ty == "b32" || ty == "u32" || ty == "s32")
          elem = 4;
        else if (ty == "b64" || ty == "u64" || ty == "s64")
          elem = 8;
        else
          return fail(t.loc, "unsupported type '" + t.text + "' for a shared variable", sdk::ErrorCode::kUnsupported);
      }
    }
    if (elem == 0) return fail(peek().loc, "expected the shared variable's type, found " + describe(peek()));
    if (!expect_word(s.name, "a shared variable name")) return false;
    std::uint64_t count = 1;
    if (at_punct('[')) {
      next();
      if (at_punct(']'))
        return fail(peek().loc, "unsupported shared array without a size (dynamic shared memory)",
                    sdk::ErrorCode::kUnsupported);
      std::int64_t n = 0;
      if (!expect_int(n)) return false;
      if (n <= 0) return fail(s.loc, "shared array size must be positive");
      count = static_cast<std::uint64_t>(n);
      if (!expect_punct(']')) return false;
    }
    if (at_punct('='))
      return fail(peek().loc, "unsupported initialiser on a shared variable", sdk::ErrorCode::kUnsupported);
    s.bytes = count * elem;
    return expect_punct(';');
  }

  bool parse_statement(Entry& e) {
    const Token& t = peek();
    if (t.kind == Token::Kind::kWord && t.text == ".reg") return parse_reg(e);
    if (t.kind == Token::Kind::kWord && t.text == ".shared") {
      SharedDecl s;
      if (!parse_shared(s)) return false;
      e.shared.push_back(std::move(s));
      return true;
    }
    if (t.kind == Token::Kind::kWord && (t.text == ".loc" || t.text == ".file")) {
      const std::uint32_t line = t.loc.line;
      const bool is_loc = t.text == ".loc";
      next();
      // .loc file line column [, function_name ..., inlined_at ...]: the source position of what follows.
      std::int64_t f = 0, l = 0, c = 0;
      if (is_loc && peek().kind == Token::Kind::kNumber && parse_int_literal(peek().text, f) &&
          peek(1).kind == Token::Kind::kNumber && parse_int_literal(peek(1).text, l) &&
          peek(2).kind == Token::Kind::kNumber && parse_int_literal(peek(2).text, c) && l > 0) {
        dbg_file_ = static_cast<int>(f);
        dbg_loc_ = {static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(c)};
        if (dbg_file_ == cuda_file_) last_cuda_ = dbg_loc_;
        if (e.dbg_file < 0) {
          e.dbg_file = dbg_file_;
          e.dbg_loc = dbg_loc_;
        }
      }
      skip_line(line);
      return true;
    }
    if (t.kind == Token::Kind::kWord && t.text == ".pragma") {
      next();
      skip_past_semicolon();
      return true;
    }
    if (t.kind == Token::Kind::kWord && t.text[0] == '.') {
      std::string what = t.text;
      if (what == ".local")
        what += "' (local memory: compile with optimisation)";
      else
        what += "'";
      return fail(t.loc, "unsupported directive '" + what, sdk::ErrorCode::kUnsupported);
    }
    if (t.kind == Token::Kind::kWord && peek(1).kind == Token::Kind::kPunct && peek(1).text == ":") {
      Statement s;
      s.kind = Statement::Kind::kLabel;
      s.label = t.text;
      s.loc = t.loc;
      next();
      next();
      e.body.push_back(std::move(s));
      return true;
    }
    Statement s;
    s.loc = t.loc;
    s.dbg_file = dbg_file_;
    s.dbg_loc = dbg_loc_;
    if (at_punct('@')) {
      next();
      if (at_punct('!')) {
        next();
        s.guard_negated = true;
      }
      if (!expect_word(s.guard, "a predicate register")) return false;
    }
    if (peek().kind != Token::Kind::kWord)
      return fail(peek().loc, "expected an instruction, found " + describe(peek()));
    s.opcode_loc = peek().loc;
    const std::string op = next().text;
    if (op == "call" || op.starts_with("call.")) {
      return fail(s.opcode_loc, "unsupported instruction '" + op + "' (device functions must be inlined)",
                  sdk::ErrorCode::kUnsupported);
    }
    std::size_t start = 0;
    while (start <= op.size()) {
      std::size_t dot = op.find('.', start);
      if (dot == std::string::npos) dot = op.size();
      s.opcode.push_back(op.substr(start, dot - start));
      start = dot + 1;
    }
    for (const std::string& part : s.opcode) {
      if (part.empty()) return fail(s.opcode_loc, "malformed instruction name '" + op + "'");
    }
    while (!at_punct(';')) {
      if (!s.operands.empty() && !expect_punct(',')) return false;
      Operand o;
      if (!parse_operand(o)) return false;
      s.operands.push_back(std::move(o));
    }
    next();  // ';'
    e.body.push_back(std::move(s));
    return true;
  }

  bool parse_operand(Operand& o) {
    o.loc = peek().loc;
    if (at_punct('[')) {
      next();
      o.kind = Operand::Kind::kAddr;
      if (peek().kind == Token::Kind::kWord) {
        o.name = next().text;
        if (at_punct('+') || at_punct('-')) {
          const bool neg = next().text == "-";
          std::int64_t off = 0;
          if (!expect_int(off)) return false;
          o.imm = neg ? negate(off) : off;
        }
      } else {
        if (!expect_int(o.imm)) return false;
      }
      return expect_punct(']');
    }
    if (peek().kind == Token::Kind::kNumber || at_punct('-')) {
      o.kind = Operand::Kind::kImm;
      const Token& t = at_punct('-') ? peek(1) : peek();
      const bool hex_float = t.text.size() > 1 && t.text[0] == '0' &&
                             (t.text[1] == 'f' || t.text[1] == 'd' || t.text[1] == 'F' || t.text[1] == 'D');
      if (t.kind == Token::Kind::kNumber && (hex_float || t.text.find('.') != std::string::npos)) {
        // Kept for the builder to reject: it knows the CUDA line the literal came from.
        o.is_float = true;
        o.name = t.text;
        o.loc = t.loc;
        if (at_punct('-')) next();
        next();
        return true;
      }
      return expect_int(o.imm);
    }
    if (at_punct('!')) {
      next();
      o.negated = true;
    }
    if (at_punct('{')) {  // a vector {a, b[, c, d]}; the builder checks where one is allowed
      next();
      o.kind = Operand::Kind::kVector;
      while (true) {
        Operand e;
        if (at_punct('{') || at_punct('[')) return fail(peek().loc, "expected a register, '_' or an immediate");
        if (!parse_operand(e)) return false;
        if (e.kind == Operand::Kind::kPair) return fail(e.loc, "expected a register, '_' or an immediate");
        o.elements.push_back(std::move(e));
        if (!at_punct(',')) break;
        next();
      }
      return expect_punct('}');
    }
    if (!expect_word(o.name, "an operand")) return false;
    o.kind = o.name == "_" ? Operand::Kind::kSink : Operand::Kind::kReg;
    if (at_punct('|')) {
      next();
      o.kind = Operand::Kind::kPair;
      if (!expect_word(o.name2, "a predicate register after '|'")) return false;
    }
    return true;
  }

  bool parse_reg(Entry& e) {
    const SrcLoc loc = next().loc;  // .reg
    std::string type;
    if (!expect_word(type, "a register type")) return false;
    if (type.size() < 2 || type[0] != '.') return fail(loc, "expected a register type, found '" + type + "'");
    if (type.starts_with(".v"))
      return fail(loc, "unsupported vector register type '" + type + "'", sdk::ErrorCode::kUnsupported);
    RegDecl decl{type.substr(1), loc};
    while (true) {
      std::string name;
      const SrcLoc name_loc = peek().loc;
      if (!expect_word(name, "a register name")) return false;
      if (at_punct('<')) {
        next();
        std::int64_t n = 0;
        if (!expect_int(n)) return false;
        if (n < 0) return fail(name_loc, "register range <" + std::to_string(n) + "> is negative");
        if (n > kMaxRegisters) {
          return fail(name_loc,
                      "register range <" + std::to_string(n) + "> exceeds the limit of " +
                          std::to_string(kMaxRegisters) + " by " + std::to_string(n - kMaxRegisters),
                      sdk::ErrorCode::kLimitExceeded);
        }
        if (!count_registers(n, name_loc, e)) return false;
        if (!expect_punct('>')) return false;
        for (std::int64_t k = 0; k < n; ++k) e.regs[name + std::to_string(k)] = decl;
      } else {
        if (!count_registers(1, name_loc, e)) return false;
        e.regs[name] = decl;
      }
      if (!at_punct(',')) break;
      next();
    }
    return expect_punct(';');
  }

  // Adds `n` (at most kMaxRegisters) to the kernel's declared registers; false over the limit.
  bool count_registers(std::int64_t n, SrcLoc loc, const Entry& e) {
    declared_regs_ += n;
    if (declared_regs_ <= kMaxRegisters) return true;
    return fail(loc,
                "kernel '" + e.name + "' declares more than " + std::to_string(kMaxRegisters) +
                    " registers (ranges expanded, redeclarations counted)",
                sdk::ErrorCode::kLimitExceeded);
  }

  std::vector<Token> toks_;
  std::string path_;
  std::size_t pos_ = 0;
  std::int64_t declared_regs_ = 0;  // in the current entry
  int dbg_file_ = -1;               // the latest .loc
  SrcLoc dbg_loc_;
  DiagnosticFiles files_;
  int cuda_file_ = -1;  // the .file id of files_.cuda
  bool in_entry_ = false;
  SrcLoc last_cuda_;  // the latest .loc in files_.cuda inside the current entry (line 0: none)
  sdk::Status status_;
};

}  // namespace

sdk::Expected<Module> parse_ptx(const std::string& text, const DiagnosticFiles& files) {
  std::vector<Token> tokens;
  sdk::Status error;
  if (!lex(text, files, tokens, error)) return error;
  Parser parser(std::move(tokens), files);
  return parser.run();
}

}  // namespace qgpu::ptx
