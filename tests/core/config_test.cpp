// Config parsing and option validation: every error names file:line:col and
// what is allowed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>

#include "qgpu/core/config.h"
#include "qgpu/sdk/plugin.h"

namespace qgpu::core {
namespace {

using ::testing::HasSubstr;

Config parse_ok(const std::string& text) {
  auto c = parse_config(text, "/tmp/test.yaml");
  EXPECT_TRUE(c.has_value()) << c.status().to_string();
  return c ? *c : Config{};
}

sdk::Status parse_error(const std::string& text) {
  auto c = parse_config(text, "t.yaml");
  EXPECT_FALSE(c.has_value());
  return c.status();
}

TEST(Config, ParsesSectionsAndSettingsInOrder) {
  Config c = parse_ok("version: 1\nlog_level: debug\nmachine:\n  plugin: machine_simt\n  lanes: 4\n  rom_blocks: 32\n");
  ASSERT_EQ(c.sections.size(), 1u);
  const PluginSection* m = c.section(QGPU_PLUGIN_MACHINE);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->plugin, "machine_simt");
  ASSERT_EQ(m->settings.size(), 2u);
  EXPECT_EQ(m->settings[0].key, "lanes");
  EXPECT_EQ(m->settings[0].text, "4");
  EXPECT_EQ(m->settings[0].where.str(), "/tmp/test.yaml:5:10");
  EXPECT_EQ(m->plugin_where.str(), "/tmp/test.yaml:4:11");
  EXPECT_EQ(*c.log_level, "debug");
  EXPECT_EQ(c.section(QGPU_PLUGIN_FRONTEND), nullptr);
}

TEST(Config, UnknownTopLevelKeySuggestsAndListsAllowed) {
  sdk::Status s = parse_error("version: 1\nbackedn:\n  plugin: x\n");
  EXPECT_EQ(s.code(), sdk::ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.location(), "t.yaml:2:1");
  EXPECT_EQ(s.message(),
            "unknown key 'backedn' (did you mean 'backend'?); allowed: version, description, log_level, "
            "plugin_paths, frontend, machine, base, backend");
}

TEST(Config, WrongTypes) {
  EXPECT_EQ(parse_error("version: one\n").message(), "version: expected an integer, got 'one'");
  EXPECT_EQ(parse_error("version: 1\nplugin_paths: abc\n").message(),
            "plugin_paths: expected a sequence of directories, got a scalar");
  EXPECT_EQ(parse_error("version: 1\nmachine: simt\n").message(),
            "machine: expected a mapping with at least 'plugin: <name>', got a scalar");
  EXPECT_EQ(parse_error("version: 1\nmachine:\n  plugin: [a, b]\n").message(),
            "machine.plugin: expected a plugin name, got a sequence");
  EXPECT_EQ(parse_error("version: 1\nlog_level: loud\n").message(),
            "log_level: unknown level 'loud'; allowed: trace, debug, info, warn, error, off");
}

TEST(Config, StructuralErrors) {
  EXPECT_EQ(parse_error("machine:\n  plugin: m\n").message(), "missing required key 'version' (write 'version: 1')");
  EXPECT_EQ(parse_error("version: 2\n").message(), "unsupported config version 2 (this qgpu reads version 1)");
  EXPECT_EQ(parse_error("version: 1\nversion: 1\n").message(), "duplicate key 'version'");
  EXPECT_EQ(parse_error("version: 1\nmachine:\n  lanes: 4\n").message(), "section 'machine' lacks 'plugin: <name>'");
  EXPECT_EQ(parse_error("").message(), "config is empty");
  EXPECT_EQ(parse_error("- a\n- b\n").message(), "config must be a mapping, got a sequence");
  sdk::Status syntax = parse_error("version: 1\nmachine: {plugin: x\n");
  EXPECT_EQ(syntax.code(), sdk::ErrorCode::kParseError);
  EXPECT_THAT(syntax.location(), HasSubstr("t.yaml:"));
}

// The first input fuzz/config_fuzzer.cpp ran: every key and value node was a reference into the
// temporary proxy of yaml-cpp's `it->` (ASan: stack-use-after-scope on every config). The errors below
// read those nodes after the loop's first statement; under the sanitizer build they catch a regression.
TEST(Config, KeyAndValueNodesOutliveTheIteratorProxy) {
  sdk::Status version = parse_error("version: 7");
  EXPECT_EQ(version.message(), "unsupported config version 7 (this qgpu reads version 1)");
  EXPECT_EQ(version.location(), "t.yaml:1:10");
  sdk::Status section = parse_error("version: 1\nmachine:\n  plugin: [m]\n");
  EXPECT_EQ(section.message(), "machine.plugin: expected a plugin name, got a sequence");
  EXPECT_EQ(section.location(), "t.yaml:3:11");
  Config c = parse_ok("version: 1\nmachine:\n  plugin: m\n  lanes: 4\n");
  ASSERT_EQ(c.sections.size(), 1u);
  ASSERT_EQ(c.sections[0].settings.size(), 1u);
  EXPECT_EQ(c.sections[0].settings[0].text, "4");
}

TEST(Config, MissingFiles) {
  auto c = load_config("/nonexistent/dir/x.yaml");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code(), sdk::ErrorCode::kNotFound);
  EXPECT_EQ(c.error().message(), "cannot open config file '/nonexistent/dir/x.yaml': No such file or directory");
  sdk::Status lib = parse_error("version: 1\nmachine:\n  plugin: m\n  library: nope.so\n");
  EXPECT_EQ(lib.location(), "t.yaml:4:12");
  EXPECT_THAT(lib.message(), HasSubstr("machine.library: no such file '"));
  sdk::Status dir = parse_error("version: 1\nplugin_paths: [does/not/exist]\n");
  EXPECT_THAT(dir.message(), HasSubstr("plugin_paths: no such directory '"));
}

TEST(Config, DefaultConfigOfTheRepositoryLoads) {
  auto c = load_config(std::string(QGPU_SOURCE_DIR) + "/configs/simt_qwen2b.yaml");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->sections.size(), 4u);
  for (const auto& [name, kind] : config_sections()) EXPECT_NE(c->section(kind), nullptr) << name;
}

// --- resolve_options against a plugin's option table.

constexpr std::array kSpecs = {
    sdk::option_string("label", "hello", "a string"),
    sdk::option_int("count", "3", 1, 10, "an integer in 1..10"),
    sdk::option_float("ratio", "0.5", "a number"),
    sdk::option_bool("flag", "false", "a boolean"),
    sdk::option_enum("mode", "fast", "fast|exact", "a choice"),
    sdk::option_path("data", "none", "none", "a path or 'none'"),
};

sdk::Expected<sdk::Options> resolve(const std::string& body) {
  auto c = parse_config("version: 1\nfrontend:\n  plugin: p\n" + body, "/cfg/t.yaml");
  EXPECT_TRUE(c) << c.status().to_string();
  std::vector<QgpuOptionSpec> specs(kSpecs.begin(), kSpecs.end());
  const PluginSection* s = c->section(QGPU_PLUGIN_FRONTEND);
  return resolve_options(specs, s->settings, QGPU_SOURCE_DIR, "'frontend' (plugin p)", s->where);
}

TEST(Options, DefaultsAreFilledIn) {
  auto o = resolve("");
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(*o->get_int("count"), 3);
  EXPECT_EQ(*o->get_string("mode"), "fast");
  EXPECT_EQ(*o->get_bool("flag"), false);
  EXPECT_EQ(*o->get_float("ratio"), 0.5);
  EXPECT_EQ(*o->get_string("data"), "none");
}

TEST(Options, ValuesAreNormalised) {
  auto o = resolve("  count: 0x0a\n  flag: True\n  data: configs\n  mode: exact\n");
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(*o->get_int("count"), 10);
  EXPECT_EQ(*o->get_bool("flag"), true);
  EXPECT_EQ(*o->get_string("data"), std::string(QGPU_SOURCE_DIR) + "/configs");
  EXPECT_EQ(*o->get_string("mode"), "exact");
}

TEST(Options, EachKindOfBadValueIsNamed) {
  struct Case {
    std::string body, location, message;
  } cases[] = {
      {"  cuont: 4\n", "/cfg/t.yaml:4:3",
       "unknown key 'cuont' in section 'frontend' (plugin p) (did you mean 'count'?); allowed: plugin, library, label, "
       "count, ratio, flag, mode, data"},
      {"  count: four\n", "/cfg/t.yaml:4:10", "count: expected an integer, got 'four'"},
      {"  count: 11\n", "/cfg/t.yaml:4:10", "count: value 11 is outside the allowed range 1..10"},
      {"  count: [1]\n", "/cfg/t.yaml:4:10", "count: expected an integer, got a sequence"},
      {"  count:\n", "/cfg/t.yaml:4:3", "count: expected an integer, got nothing"},
      {"  ratio: lots\n", "/cfg/t.yaml:4:10", "ratio: expected a number, got 'lots'"},
      {"  flag: maybe\n", "/cfg/t.yaml:4:9", "flag: expected true or false, got 'maybe'"},
      {"  mode: slow\n", "/cfg/t.yaml:4:9", "mode: unknown value 'slow'; allowed: fast, exact"},
      {"  data: missing/dir\n", "/cfg/t.yaml:4:9",
       "data: no such file or directory '" + std::string(QGPU_SOURCE_DIR) + "/missing/dir' (or use one of: none)"},
  };
  for (const Case& c : cases) {
    auto o = resolve(c.body);
    ASSERT_FALSE(o) << c.body;
    EXPECT_EQ(o.error().location(), c.location) << c.body;
    EXPECT_EQ(o.error().message(), c.message) << c.body;
  }
}

TEST(Options, RequiredKeyWithoutDefault) {
  constexpr std::array specs = {sdk::option_string("model", nullptr, "the model to load")};
  std::vector<QgpuOptionSpec> v(specs.begin(), specs.end());
  auto o = resolve_options(v, {}, "/", "'base' (plugin b)", SourceLocation{"c.yaml", 3, 1});
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().to_string(), "c.yaml:3:1: error: section 'base' (plugin b) lacks required key 'model' (the model to load)");
  EXPECT_FALSE(default_options(v));
}

}  // namespace
}  // namespace qgpu::core
