// Demangled kernel names (source_names.h).
#include "source_names.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <memory>

namespace qgpu::ptx {
namespace {

// The parts of a demangled function name: `void tset<int>(int*)` -> {"tset", "tset<int>", "tset<int>(int*)"}.
struct NameForms {
  std::string plain;      // qualified name, no template arguments, no parameters
  std::string templated;  // with template arguments
  std::string full;       // with template arguments and parameters
};

NameForms forms_of(const std::string& entry) {
  const std::string d = demangle(entry);
  if (d == entry || d.empty() || d.back() != ')') return {entry, entry, entry};
  // The parameter list is the last balanced (...) group.
  int depth = 0;
  std::size_t open = std::string::npos;
  for (std::size_t i = d.size(); i-- > 0;) {
    if (d[i] == ')') ++depth;
    if (d[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos || open == 0) return {entry, entry, entry};
  std::string head = d.substr(0, open);
  // A template function's name starts with its return type ("void "): drop up to the last space
  // outside <...> and (...) (spaces inside, as in "unsigned int" or "(anonymous namespace)", stay).
  depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (c == ' ' && depth == 0) start = i + 1;
  }
  head = head.substr(start);
  // Template arguments: the trailing <...> group of the last name component.
  std::string plain = head;
  if (!plain.empty() && plain.back() == '>') {
    depth = 0;
    for (std::size_t i = plain.size(); i-- > 0;) {
      if (plain[i] == '>') ++depth;
      if (plain[i] == '<' && --depth == 0) {
        plain.resize(i);
        break;
      }
    }
  }
  return {plain, head, head + d.substr(open)};
}

}  // namespace

std::string demangle(const std::string& name) {
  if (!name.starts_with("_Z")) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !out) return name;
  return out.get();
}

std::string function_name(const std::string& name) {
  return forms_of(name).plain;
}

std::string declared_identifier(const std::string& name) {
  const std::string plain = function_name(name);
  const auto colons = plain.rfind("::");
  return colons == std::string::npos ? plain : plain.substr(colons + 2);
}

std::vector<std::string> kernel_source_names(const std::vector<std::string>& entries) {
  std::vector<NameForms> forms;
  for (const std::string& e : entries) forms.push_back(forms_of(e));
  using Form = std::string NameForms::*;
  const Form ladder[] = {&NameForms::plain, &NameForms::templated, &NameForms::full};
  std::vector<std::string> names(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    names[i] = entries[i];
    for (Form form : ladder) {
      bool unique = true;
      for (std::size_t j = 0; j < entries.size() && unique; ++j) unique = j == i || forms[j].*form != forms[i].*form;
      if (unique) {
        names[i] = forms[i].*form;
        break;
      }
    }
  }
  // Forms of different rungs can still meet (`f<int>` as one kernel's plain name and another's
  // templated one): those kernels keep their PTX names.
  std::map<std::string, int> count;
  for (const std::string& n : names) ++count[n];
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (count[names[i]] > 1) names[i] = entries[i];
  }
  return names;
}

}  // namespace qgpu::ptx
