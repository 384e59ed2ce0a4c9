// Plugin loading: good plugins load from their shared libraries, bad ones are
// refused with a reason that names what was got and what was expected, and
// exceptions thrown by plugins never reach the host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "qgpu/core/plugin_registry.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::core {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kTestPlugins = QGPU_TEST_PLUGIN_DIR;
const fs::path kPlugins = QGPU_PLUGIN_DIR;

std::string load_failure(const std::string& file) {
  PluginRegistry registry;
  auto loaded = registry.load_file(kTestPlugins / file);
  EXPECT_FALSE(loaded.has_value()) << file;
  EXPECT_EQ(registry.failures().size(), 1u);
  return loaded ? std::string() : loaded.error().message();
}

TEST(Registry, InTreePluginsLoadFromTheirSharedLibraries) {
  PluginRegistry registry;
  ASSERT_TRUE(registry.scan_directory(kPlugins).is_ok());
  struct Expected {
    QgpuPluginKind kind;
    const char* name;
  } expected[] = {{QGPU_PLUGIN_FRONTEND, "frontend_ptx"},
                  {QGPU_PLUGIN_MACHINE, "machine_simt"},
                  {QGPU_PLUGIN_BASE_MODEL, "base_qwen35"}};
  for (const auto& e : expected) {
    const PluginInfo* p = registry.find(e.kind, e.name);
    ASSERT_NE(p, nullptr) << e.name;
    EXPECT_EQ(p->path, kPlugins / ("qgpu_" + std::string(e.name) + ".so"));
    EXPECT_FALSE(p->version.empty());
    EXPECT_EQ(p->sdk_version, QGPU_SDK_VERSION_STRING);
  }
  EXPECT_TRUE(registry.failures().empty());
}

TEST(Registry, WrongAbiVersionIsRefusedNamingBoth) {
  EXPECT_EQ(load_failure("qgpu_test_bad_abi.so"),
            "plugin ABI version " + std::to_string(QGPU_ABI_VERSION + 41) + ", expected " +
                std::to_string(QGPU_ABI_VERSION) + " (rebuild the plugin against this SDK)");
}

TEST(Registry, WrongFingerprintIsRefusedNamingBoth) {
  EXPECT_EQ(load_failure("qgpu_test_bad_fingerprint.so"),
            "build fingerprint 'libc++;64-bit;sdk-abi-1', expected '" + std::string(host_fingerprint()) + "'");
}

TEST(Registry, ThrowingDescriptorIsALoadFailure) {
  EXPECT_EQ(load_failure("qgpu_test_descriptor_throws.so"), "descriptor function threw: descriptor exploded");
}

TEST(Registry, LibraryWithoutEntrySymbol) {
  EXPECT_EQ(load_failure("qgpu_test_not_a_plugin.so"), "not a qgpu plugin: no 'qgpu_plugin_descriptor' symbol");
}

TEST(Registry, FileThatIsNotASharedLibrary) {
  EXPECT_THAT(load_failure("qgpu_test_garbage.so"), HasSubstr("cannot load shared library: "));
  EXPECT_THAT(load_failure("qgpu_test_garbage.so"), HasSubstr("qgpu_test_garbage.so"));
}

TEST(Registry, MissingFileAndDirectory) {
  EXPECT_EQ(load_failure("qgpu_nothing_here.so"), "no such file");
  PluginRegistry registry;
  EXPECT_EQ(registry.scan_directory("/no/such/dir").message(),
            "plugin directory '/no/such/dir' does not exist or is not a directory");
}

TEST(Registry, ScanCollectsFailuresAndKeepsGoing) {
  PluginRegistry registry;
  ASSERT_TRUE(registry.scan_directory(kTestPlugins).is_ok());
  EXPECT_EQ(registry.failures().size(), 5u);  // bad ABI, bad fingerprint, throwing descriptor, no symbol, garbage
  EXPECT_NE(registry.find(QGPU_PLUGIN_MACHINE, "test_throw_describe"), nullptr);
  EXPECT_NE(registry.find(QGPU_PLUGIN_MACHINE, "test_throw_create"), nullptr);
  EXPECT_NE(registry.find(QGPU_PLUGIN_FRONTEND, "test_options"), nullptr);
  EXPECT_EQ(registry.plugins().size(), 3u);
}

TEST(Registry, SamePluginInALaterDirectoryIsShadowed) {
  PluginRegistry registry;
  ASSERT_TRUE(registry.scan_directory(kTestPlugins).is_ok());
  ASSERT_TRUE(registry.scan_directory(kTestPlugins).is_ok());  // same files again: already loaded, not shadowed
  EXPECT_EQ(registry.plugins().size(), 3u);
}

TEST(Registry, ExceptionFromConstructorBecomesAnError) {
  PluginRegistry registry;
  auto info = registry.load_file(kTestPlugins / "qgpu_test_throw_create.so");
  ASSERT_TRUE(info) << info.status().to_string();
  auto machine = registry.create<sdk::Machine>(**info, sdk::Options{});
  ASSERT_FALSE(machine);
  EXPECT_EQ(machine.error().message(), "plugin 'test_throw_create' failed to start: constructor exploded");
}

TEST(Registry, ExceptionsFromMethodsAreGuarded) {
  PluginRegistry registry;
  auto info = registry.load_file(kTestPlugins / "qgpu_test_throw_describe.so");
  ASSERT_TRUE(info);
  auto machine = registry.create<sdk::Machine>(**info, sdk::Options{});
  ASSERT_TRUE(machine) << machine.status().to_string();
  auto d = guarded_call("test_throw_describe", "describe()", [&] { return (*machine)->describe(); });
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code(), sdk::ErrorCode::kPluginError);
  EXPECT_EQ(d.error().message(), "plugin 'test_throw_describe' threw from describe(): describe exploded");
  struct FakeProgram : sdk::MachineProgram {
    std::string dump() const override { return ""; }
  } program;
  auto r = guarded_call("test_throw_describe", "interpret()", [&] { return (*machine)->interpret(program, {}, {}); });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "plugin 'test_throw_describe' threw a non-standard exception from interpret()");
}

TEST(Registry, CreatingWithTheWrongInterfaceIsRefused) {
  PluginRegistry registry;
  auto info = registry.load_file(kTestPlugins / "qgpu_test_options.so");
  ASSERT_TRUE(info);
  auto wrong = registry.create<sdk::Machine>(**info, sdk::Options{});
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message(), "plugin 'test_options' is a frontend plugin, not a machine plugin");
}

TEST(Registry, PluginObjectOutlivesTheRegistry) {
  std::shared_ptr<sdk::Frontend> frontend;
  {
    PluginRegistry registry;
    auto info = registry.load_file(kTestPlugins / "qgpu_test_options.so");
    ASSERT_TRUE(info);
    auto made = registry.create<sdk::Frontend>(**info, sdk::Options(std::map<std::string, std::string>{{"label", "kept"}}));
    ASSERT_TRUE(made);
    frontend = *made;
  }
  // The library stays loaded while the object lives: its vtable is still callable.
  auto d = frontend->describe();
  ASSERT_TRUE(d);
  ASSERT_EQ(d->properties.size(), 1u);
  EXPECT_EQ(d->properties[0].second, "kept");
}

TEST(Registry, InTreeMachineAnswersThroughTheInterface) {
  PluginRegistry registry;
  auto info = registry.load_file(kPlugins / "qgpu_machine_simt.so");
  ASSERT_TRUE(info) << info.status().to_string();
  auto machine = registry.create<sdk::Machine>(**info, sdk::Options({{"lanes", "4"}, {"registers", "16"},
      {"rom_blocks", "32"}, {"block_instructions", "4"}, {"global_words", "126"}, {"shared_words", "32"},
      {"max_threads", "128"}, {"max_block_threads", "32"}}));
  ASSERT_TRUE(machine) << machine.status().to_string();
  sdk::KernelIR empty;
  empty.name = "dot";
  auto program = (*machine)->lower(empty, sdk::LaunchShape{});
  ASSERT_FALSE(program);  // a kernel without blocks is malformed input, reported as an error
  EXPECT_EQ(program.error().code(), sdk::ErrorCode::kInvalidArgument);
  EXPECT_EQ(program.error().message(), "kernel 'dot': has no blocks");
}

}  // namespace
}  // namespace qgpu::core
