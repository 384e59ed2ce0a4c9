// Parameter names of __global__ functions, read from the CUDA source.
//
// PTX names parameters <entry>_param_<i>; users name launch arguments with the
// names they wrote in CUDA. A small scan of the source (comments and literals
// blanked, then `__global__ ... name ( params )`) recovers them; any doubt
// (unnamed or unparsable parameters, a count that disagrees with the PTX)
// leaves the generic names in place.
#include <cctype>
#include <string>
#include <vector>

#include "pipeline.h"

namespace qgpu::ptx {
namespace {

// Replaces comments and string/char literals by spaces, keeping offsets.
std::string blank_comments(const std::string& s) {
  std::string out = s;
  std::size_t i = 0;
  while (i < out.size()) {
    if (out.compare(i, 2, "//") == 0) {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (out.compare(i, 2, "/*") == 0) {
      std::size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      for (; i < end; ++i) {
        if (out[i] != '\n') out[i] = ' ';
      }
    } else if (out[i] == '"' || out[i] == '\'') {
      const char quote = out[i++];
      while (i < out.size() && out[i] != quote && out[i] != '\n') {
        if (out[i] == '\\' && i + 1 < out.size()) out[i++] = ' ';
        out[i++] = ' ';
      }
      ++i;
    } else {
      ++i;
    }
  }
  return out;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The last identifier of one parameter declaration, if it names the parameter.
std::string param_name(std::string decl) {
  if (auto eq = decl.find('='); eq != std::string::npos) decl.resize(eq);  // default argument
  if (auto br = decl.find('['); br != std::string::npos) decl.resize(br);  // array declarator
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < decl.size();) {
    if (ident_char(decl[i])) {
      std::size_t j = i;
      while (j < decl.size() && ident_char(decl[j])) ++j;
      tokens.push_back(decl.substr(i, j - i));
      i = j;
    } else if (!std::isspace(static_cast<unsigned char>(decl[i]))) {
      tokens.emplace_back(1, decl[i++]);
    } else {
      ++i;
    }
  }
  // "int* p", "const int n", "unsigned n": a name is an identifier after at least one other token.
  if (tokens.size() < 2 || !ident_char(tokens.back()[0]) || std::isdigit(static_cast<unsigned char>(tokens.back()[0]))) {
    return {};
  }
  return tokens.back();
}

// "_Z3dotPKiS0_Pii" -> "dot"; other names are returned unchanged.
std::string source_name(const std::string& entry) {
  if (entry.rfind("_Z", 0) != 0) return entry;
  std::size_t i = 2;
  std::size_t len = 0;
  while (i < entry.size() && std::isdigit(static_cast<unsigned char>(entry[i]))) len = len * 10 + (entry[i++] - '0');
  if (len == 0 || i + len > entry.size()) return entry;
  return entry.substr(i, len);
}

}  // namespace

std::optional<std::vector<std::string>> cuda_param_names(const std::string& source, const std::string& entry) {
  const std::string text = blank_comments(source);
  const std::string name = source_name(entry);
  std::vector<std::vector<std::string>> found;
  std::size_t pos = 0;
  while ((pos = text.find("__global__", pos)) != std::string::npos) {
    pos += 10;
    // The declarator: the first "name (" after __global__, before any body or ';'.
    std::size_t open = text.find('(', pos);
    if (open == std::string::npos) break;
    std::size_t stop = text.find_first_of("{;", pos);
    if (stop != std::string::npos && stop < open) continue;
    std::size_t end = open;
    while (end > pos && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    std::size_t begin = end;
    while (begin > pos && ident_char(text[begin - 1])) --begin;
    if (text.compare(begin, end - begin, name) != 0 || end - begin != name.size()) continue;
    // Split the parameter list at depth-0 commas.
    std::vector<std::string> names;
    std::string current;
    int depth = 0;
    std::size_t i = open + 1;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '(' || c == '<' || c == '[') ++depth;
      if (c == ')' && depth == 0) break;
      if (c == ')' || c == '>' || c == ']') --depth;
      if (c == ',' && depth == 0) {
        names.push_back(param_name(current));
        current.clear();
      } else {
        current += c;
      }
    }
    if (i == text.size()) return std::nullopt;
    if (current.find_first_not_of(" \t\r\n") != std::string::npos) names.push_back(param_name(current));
    if (names.size() == 1 && names[0].empty() && current.find("void") != std::string::npos) names.clear();
    found.push_back(std::move(names));
  }
  // Several declarations (a prototype and the definition, or overloads): the named ones must agree, since
  // a PTX entry does not say which overload it is.
  std::optional<std::vector<std::string>> result;
  for (std::vector<std::string>& names : found) {
    bool all_named = true;
    for (const std::string& n : names) all_named = all_named && !n.empty();
    if (!all_named && found.size() > 1) continue;
    if (result && *result != names) return std::nullopt;
    result = std::move(names);
  }
  if (!result && !found.empty()) result = std::move(found.front());
  return result;
}

}  // namespace qgpu::ptx
