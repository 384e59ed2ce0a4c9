#include "qgpu/core/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "qgpu/core/plugin_registry.h"
#include "qgpu/core/text.h"

namespace qgpu::core {
namespace fs = std::filesystem;
using sdk::ErrorCode;
using sdk::Expected;
using sdk::Status;

std::string SourceLocation::str() const {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  if (column > 0) s += ":" + std::to_string(column);
  return s;
}

const std::vector<std::pair<std::string, QgpuPluginKind>>& config_sections() {
  static const std::vector<std::pair<std::string, QgpuPluginKind>> kSections = {
      {"frontend", QGPU_PLUGIN_FRONTEND},
      {"machine", QGPU_PLUGIN_MACHINE},
      {"base", QGPU_PLUGIN_BASE_MODEL},
      {"backend", QGPU_PLUGIN_TENSOR_BACKEND},
  };
  return kSections;
}

const PluginSection* Config::section(QgpuPluginKind kind) const {
  for (const auto& s : sections) {
    if (s.kind == kind) return &s;
  }
  return nullptr;
}

std::string_view option_type_name(QgpuOptionType type) {
  switch (type) {
    case QGPU_OPTION_STRING: return "string";
    case QGPU_OPTION_INT: return "integer";
    case QGPU_OPTION_FLOAT: return "number";
    case QGPU_OPTION_BOOL: return "boolean";
    case QGPU_OPTION_ENUM: return "choice";
    case QGPU_OPTION_PATH: return "path";
  }
  return "?";
}

namespace {

const std::vector<std::string> kTopLevelKeys = {"version",  "description", "log_level", "plugin_paths",
                                                "frontend", "machine",     "base",      "backend"};
const std::vector<std::string> kLogLevels = {"trace", "debug", "info", "warn", "error", "off"};

std::vector<std::string> split_choices(const char* choices) {
  std::vector<std::string> out;
  if (choices == nullptr) return out;
  std::string_view s(choices);
  while (!s.empty()) {
    auto bar = s.find('|');
    out.emplace_back(s.substr(0, bar));
    if (bar == std::string_view::npos) break;
    s.remove_prefix(bar + 1);
  }
  return out;
}

std::string node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: return "scalar";
    case YAML::NodeType::Sequence: return "sequence";
    case YAML::NodeType::Map: return "mapping";
    default: return "null";
  }
}

std::string a_kind(const std::string& kind) {
  if (kind == "scalar") return "a scalar";
  if (kind == "null") return "nothing";
  return "a " + kind;
}

// Validates one YAML file against the top-level schema.
class ConfigParser {
 public:
  ConfigParser(fs::path file) : file_(std::move(file)) {}

  Expected<Config> parse(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      return error(e.mark, ErrorCode::kParseError, e.msg);
    }
    Config config;
    config.file = file_;
    if (root.IsNull())
      return error(SourceLocation{file_.string(), 0, 0}, ErrorCode::kInvalidArgument, "config is empty");
    if (!root.IsMap())
      return error(root.Mark(), ErrorCode::kInvalidArgument,
                   "config must be a mapping, got " + a_kind(node_kind(root)));

    bool saw_version = false;
    std::set<std::string> seen;
    for (auto it = root.begin(); it != root.end(); ++it) {
      // Copies (shared handles): `it->` returns a temporary proxy, so a reference into it dangles
      // after this statement (ASan: stack-use-after-scope, found by fuzz/config_fuzzer.cpp).
      const YAML::Node key_node = it->first;
      const YAML::Node value = it->second;
      if (!key_node.IsScalar()) return error(key_node.Mark(), ErrorCode::kInvalidArgument, "keys must be plain names");
      const std::string key = key_node.Scalar();
      if (!seen.insert(key).second)
        return error(key_node.Mark(), ErrorCode::kInvalidArgument, "duplicate key '" + key + "'");

      if (key == "version") {
        auto v = scalar_int(value, "version");
        if (!v) return v.error();
        if (*v != kConfigVersion) {
          return error(value.Mark(), ErrorCode::kUnsupported,
                       "unsupported config version " + std::to_string(*v) + " (this qgpu reads version " +
                           std::to_string(kConfigVersion) + ")");
        }
        config.version = static_cast<int>(*v);
        saw_version = true;
      } else if (key == "description") {
        auto v = scalar_text(value, "description", "a string");
        if (!v) return v.error();
        config.description = *v;
      } else if (key == "log_level") {
        auto v = scalar_text(value, "log_level", "one of " + join(kLogLevels));
        if (!v) return v.error();
        if (std::find(kLogLevels.begin(), kLogLevels.end(), *v) == kLogLevels.end()) {
          return error(value.Mark(), ErrorCode::kInvalidArgument,
                       "log_level: unknown level '" + *v + "'; allowed: " + join(kLogLevels));
        }
        config.log_level = *v;
      } else if (key == "plugin_paths") {
        if (!value.IsSequence()) {
          return error(value.Mark(), ErrorCode::kInvalidArgument,
                       "plugin_paths: expected a sequence of directories, got " + a_kind(node_kind(value)));
        }
        for (const YAML::Node& entry : value) {
          auto v = scalar_text(entry, "plugin_paths entry", "a directory");
          if (!v) return v.error();
          fs::path dir = resolve(*v);
          std::error_code ec;
          if (!fs::is_directory(dir, ec)) {
            return error(entry.Mark(), ErrorCode::kNotFound, "plugin_paths: no such directory '" + dir.string() + "'");
          }
          config.plugin_paths.push_back(dir);
        }
      } else if (auto kind = section_kind(key)) {
        auto section = parse_section(key, *kind, key_node, value);
        if (!section) return section.error();
        config.sections.push_back(std::move(*section));
      } else {
        return unknown_key(key_node, key, kTopLevelKeys, "");
      }
    }
    if (!saw_version) {
      return error(SourceLocation{file_.string(), 1, 1}, ErrorCode::kInvalidArgument,
                   "missing required key 'version' (write 'version: " + std::to_string(kConfigVersion) + "')");
    }
    return config;
  }

 private:
  static std::optional<QgpuPluginKind> section_kind(const std::string& key) {
    for (const auto& [name, kind] : config_sections()) {
      if (name == key) return kind;
    }
    return std::nullopt;
  }

  SourceLocation at(const YAML::Mark& mark) const {
    if (mark.is_null()) return SourceLocation{file_.string(), 0, 0};
    return SourceLocation{file_.string(), mark.line + 1, mark.column + 1};
  }
  Status error(const YAML::Mark& mark, ErrorCode code, std::string message) const {
    return error(at(mark), code, std::move(message));
  }
  static Status error(const SourceLocation& where, ErrorCode code, std::string message) {
    return sdk::error_at(where.str(), code, std::move(message));
  }

  Status unknown_key(const YAML::Node& key_node, const std::string& key, const std::vector<std::string>& allowed,
                     const std::string& section) const {
    std::string message = "unknown key '" + key + "'";
    if (!section.empty()) message += " in section '" + section + "'";
    std::string hint = closest_match(key, allowed);
    if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
    message += "; allowed: " + join(allowed);
    return error(key_node.Mark(), ErrorCode::kInvalidArgument, message);
  }

  Expected<std::string> scalar_text(const YAML::Node& node, const std::string& what,
                                    const std::string& expected) const {
    if (!node.IsScalar()) {
      return error(node.Mark(), ErrorCode::kInvalidArgument,
                   what + ": expected " + expected + ", got " + a_kind(node_kind(node)));
    }
    return node.Scalar();
  }

  Expected<std::int64_t> scalar_int(const YAML::Node& node, const std::string& what) const {
    auto text = scalar_text(node, what, "an integer");
    if (!text) return text.error();
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(text->c_str(), &end, 10);
    if (text->empty() || *end != '\0' || errno == ERANGE) {
      return error(node.Mark(), ErrorCode::kInvalidArgument, what + ": expected an integer, got '" + *text + "'");
    }
    return static_cast<std::int64_t>(v);
  }

  fs::path resolve(const std::string& path) const {
    fs::path p(path);
    if (p.is_relative()) p = file_.parent_path() / p;
    return p.lexically_normal();
  }

  Expected<PluginSection> parse_section(const std::string& name, QgpuPluginKind kind, const YAML::Node& key_node,
                                        const YAML::Node& value) const {
    PluginSection section;
    section.name = name;
    section.kind = kind;
    section.where = at(key_node.Mark());
    if (!value.IsMap()) {
      return error(value.IsNull() ? key_node.Mark() : value.Mark(), ErrorCode::kInvalidArgument,
                   name + ": expected a mapping with at least 'plugin: <name>', got " + a_kind(node_kind(value)));
    }
    std::set<std::string> seen;
    bool saw_plugin = false;
    for (auto it = value.begin(); it != value.end(); ++it) {
      const YAML::Node k = it->first;  // copies: see parse()
      const YAML::Node v = it->second;
      if (!k.IsScalar()) return error(k.Mark(), ErrorCode::kInvalidArgument, "keys must be plain names");
      const std::string key = k.Scalar();
      if (!seen.insert(key).second) {
        return error(k.Mark(), ErrorCode::kInvalidArgument, "duplicate key '" + key + "' in section '" + name + "'");
      }
      if (key == "plugin") {
        auto text = scalar_text(v, name + ".plugin", "a plugin name");
        if (!text) return text.error();
        section.plugin = *text;
        section.plugin_where = at(v.Mark());
        saw_plugin = true;
      } else if (key == "library") {
        auto text = scalar_text(v, name + ".library", "a path to a plugin library");
        if (!text) return text.error();
        fs::path lib = resolve(*text);
        std::error_code ec;
        if (!fs::is_regular_file(lib, ec)) {
          return error(v.Mark(), ErrorCode::kNotFound, name + ".library: no such file '" + lib.string() + "'");
        }
        section.library = lib;
        section.library_where = at(v.Mark());
      } else {
        ConfigSetting setting;
        setting.key = key;
        setting.node_kind = node_kind(v);
        if (v.IsScalar()) setting.text = v.Scalar();
        setting.where = at(v.IsNull() ? k.Mark() : v.Mark());
        setting.key_where = at(k.Mark());
        section.settings.push_back(std::move(setting));
      }
    }
    if (!saw_plugin) {
      return error(key_node.Mark(), ErrorCode::kInvalidArgument, "section '" + name + "' lacks 'plugin: <name>'");
    }
    return section;
  }

  fs::path file_;
};

bool parse_int(const std::string& text, std::int64_t& out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const bool hex = text.size() > 2 && (text.rfind("0x", 0) == 0 || text.rfind("-0x", 0) == 0);
  long long v = std::strtoll(text.c_str(), &end, hex ? 16 : 10);
  if (*end != '\0' || errno == ERANGE) return false;
  out = v;
  return true;
}

// Checks one value against its spec and returns it in normal form.
Expected<std::string> check_value(const QgpuOptionSpec& spec, const std::string& label, const std::string& text,
                                  const std::string& kind, const SourceLocation& where, const fs::path& base_dir) {
  auto fail = [&](ErrorCode code, const std::string& message) {
    return sdk::error_at(where.str(), code, label + ": " + message);
  };
  const auto type = static_cast<QgpuOptionType>(spec.type);
  if (kind != "scalar") {
    return fail(ErrorCode::kInvalidArgument, "expected " + std::string(type == QGPU_OPTION_INT ? "an " : "a ") +
                                                 std::string(option_type_name(type)) + ", got " + a_kind(kind));
  }
  switch (type) {
    case QGPU_OPTION_STRING: return text;
    case QGPU_OPTION_INT: {
      std::int64_t v = 0;
      if (!parse_int(text, v)) return fail(ErrorCode::kInvalidArgument, "expected an integer, got '" + text + "'");
      if (spec.min_value <= spec.max_value && (v < spec.min_value || v > spec.max_value)) {
        return fail(ErrorCode::kInvalidArgument, "value " + text + " is outside the allowed range " +
                                                     std::to_string(spec.min_value) + ".." +
                                                     std::to_string(spec.max_value));
      }
      return std::to_string(v);
    }
    case QGPU_OPTION_FLOAT: {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v)) {
        return fail(ErrorCode::kInvalidArgument, "expected a number, got '" + text + "'");
      }
      return text;
    }
    case QGPU_OPTION_BOOL: {
      if (text == "true" || text == "True" || text == "TRUE") return std::string("true");
      if (text == "false" || text == "False" || text == "FALSE") return std::string("false");
      return fail(ErrorCode::kInvalidArgument, "expected true or false, got '" + text + "'");
    }
    case QGPU_OPTION_ENUM: {
      auto choices = split_choices(spec.choices);
      if (std::find(choices.begin(), choices.end(), text) != choices.end()) return text;
      return fail(ErrorCode::kInvalidArgument, "unknown value '" + text + "'; allowed: " + join(choices));
    }
    case QGPU_OPTION_PATH: {
      auto keywords = split_choices(spec.choices);
      if (std::find(keywords.begin(), keywords.end(), text) != keywords.end()) return text;
      if (text.empty()) return fail(ErrorCode::kInvalidArgument, "expected a path, got an empty string");
      fs::path p(text);
      if (p.is_relative()) p = base_dir / p;
      p = p.lexically_normal();
      std::error_code ec;
      if (!fs::exists(p, ec)) {
        std::string message = "no such file or directory '" + p.string() + "'";
        if (!keywords.empty()) message += " (or use one of: " + join(keywords) + ")";
        return fail(ErrorCode::kNotFound, message);
      }
      return p.string();
    }
  }
  return fail(ErrorCode::kInternal, "option has an unknown type");
}

}  // namespace

Expected<Config> parse_config(const std::string& text, const fs::path& file) {
  return ConfigParser(file).parse(text);
}

Expected<Config> load_config(const fs::path& requested) {
  std::error_code ec;
  fs::path file = fs::absolute(requested, ec);
  if (ec) file = requested;
  if (fs::is_directory(file, ec)) return sdk::invalid_argument("config '" + requested.string() + "' is a directory");
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return sdk::not_found("cannot open config file '" + requested.string() + "': " + std::strerror(errno));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  // Report locations with the path the user gave, resolve paths with the absolute one.
  auto config = ConfigParser(requested).parse(buffer.str());
  if (config) {
    config->file = file.lexically_normal();
    for (auto& dir : config->plugin_paths) {
      if (dir.is_relative()) dir = fs::absolute(dir, ec).lexically_normal();
    }
    for (auto& section : config->sections) {
      if (section.library && section.library->is_relative()) {
        section.library = fs::absolute(*section.library, ec).lexically_normal();
      }
    }
  }
  return config;
}

Expected<sdk::Options> resolve_options(const std::vector<QgpuOptionSpec>& specs,
                                       const std::vector<ConfigSetting>& settings, const fs::path& base_dir,
                                       const std::string& section_label, const SourceLocation& section_where) {
  std::map<std::string, std::string> values;
  std::vector<std::string> allowed = {"plugin", "library"};
  for (const auto& spec : specs) allowed.emplace_back(spec.name);

  for (const ConfigSetting& setting : settings) {
    const QgpuOptionSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (setting.key == s.name) spec = &s;
    }
    if (spec == nullptr) {
      std::string message = "unknown key '" + setting.key + "' in section " + section_label;
      std::string hint = closest_match(setting.key, allowed);
      if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
      message += "; allowed: " + join(allowed);
      return sdk::error_at(setting.key_where.str(), ErrorCode::kInvalidArgument, message);
    }
    auto value = check_value(*spec, setting.key, setting.text, setting.node_kind, setting.where, base_dir);
    if (!value) return value.error();
    values[setting.key] = *value;
  }
  for (const auto& spec : specs) {
    if (values.count(spec.name) != 0) continue;
    if (spec.default_value == nullptr) {
      return sdk::error_at(section_where.str(), ErrorCode::kInvalidArgument,
                           "section " + section_label + " lacks required key '" + spec.name + "' (" +
                               (spec.help ? spec.help : "no description") + ")");
    }
    values[spec.name] = spec.default_value;
  }
  return sdk::Options(std::move(values));
}

Expected<sdk::Options> default_options(const std::vector<QgpuOptionSpec>& specs) {
  std::map<std::string, std::string> values;
  for (const auto& spec : specs) {
    if (spec.default_value == nullptr) {
      return sdk::invalid_argument(std::string("option '") + spec.name + "' has no default and must be configured");
    }
    values[spec.name] = spec.default_value;
  }
  return sdk::Options(std::move(values));
}

}  // namespace qgpu::core
