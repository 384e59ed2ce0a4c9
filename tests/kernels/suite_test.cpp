// The kernel suite's test driver. Registers, per case of suite.cpp:
//   kernels_selfcheck.<case>  the table entry is sound: limits respected, the kernel is in its file,
//                             the reference runs, and the kernel compiled as host C++ and emulated
//                             (emu/) gives the reference's arrays; also reference == GPU golden
//                             where bench/gpu_golden/golden.json has the case.
//   kernels.<case>            qgpu-host run ... --engine interp --json gives the reference's arrays
//                             (and the GPU golden's), or fails with the expected one-line error.
//   kernels_nvcc.<case>       the same from the committed nvcc PTX (ptx-nvcc/<file>.ptx), where
//                             parameters are param<i>: arguments by position, arrays mapped back to
//                             CUDA names through the table's parameter order.
// Plus kernels_selfcheck.nvcc_ptx_up_to_date: every cu/*.cu has ptx-nvcc/*.ptx made from its
// current text.
// Extra modes: --list-json prints the table (launches and expected arrays) as JSON.
#include "suite.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>

#include "emu/emu.h"

namespace qgpu::kernels {
namespace {

using nlohmann::json;

struct ProcessResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string out, err;
};

// Runs argv[0] with the arguments, capturing stdout and stderr separately.
ProcessResult run_process(const std::vector<std::string>& argv) {
  ProcessResult r;
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) {
    r.err = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[k]->append(buf, static_cast<std::size_t>(n));
      } else {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string quote_command(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + ("'" + a + "'");
  return s;
}

// Compares one array; reports the first few differing words.
::testing::AssertionResult same_words(const std::string& what, const Words& expected, const Words& got) {
  if (expected == got) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << what << ": ";
  if (expected.size() != got.size()) os << "length " << got.size() << ", expected " << expected.size() << "; ";
  int shown = 0;
  for (std::size_t i = 0; i < std::min(expected.size(), got.size()) && shown < 6; ++i) {
    if (expected[i] == got[i]) continue;
    os << "[" << i << "] got " << got[i] << " expected " << expected[i] << "; ";
    ++shown;
  }
  return ::testing::AssertionFailure() << os.str();
}

// A JSON array of int32 words, accepting either signed or unsigned spellings of each word.
template <class Json>
std::optional<Words> to_words(const Json& j) {
  if (!j.is_array()) return std::nullopt;
  Words w;
  for (const auto& v : j) {
    if (!v.is_number_integer()) return std::nullopt;
    const auto x = v.template get<std::int64_t>();
    if (x < INT32_MIN || x > static_cast<std::int64_t>(UINT32_MAX)) return std::nullopt;
    w.push_back(static_cast<std::int32_t>(static_cast<std::uint32_t>(x)));
  }
  return w;
}

// bench/gpu_golden/golden.json, when present: per case, the fingerprint of the launch it was
// made from and the final arrays.
struct GoldenCase {
  std::string fingerprint;
  std::map<std::string, Words> arrays;
};
using Golden = std::map<std::string, GoldenCase>;

const Golden& golden() {
  static const Golden g = [] {
    Golden out;
    const char* env = std::getenv("QGPU_GOLDEN_FILE");  // another golden file, e.g. one just fetched
    const std::string path = env != nullptr && *env != '\0' ? env : QGPU_GOLDEN_FILE;
    std::ifstream in(path);
    if (!in) return out;
    const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || !doc.contains("cases") || !doc["cases"].is_object()) {
      ADD_FAILURE() << path << ": not a golden file (no \"cases\" object)";
      return out;
    }
    for (const auto& [name, c] : doc["cases"].items()) {
      if (!c.contains("arrays") || !c["arrays"].is_object()) continue;
      if (c.contains("fingerprint") && c["fingerprint"].is_string()) out[name].fingerprint = c["fingerprint"];
      for (const auto& [array, words] : c["arrays"].items())
        if (auto w = to_words(words)) out[name].arrays[array] = *w;
    }
    return out;
  }();
  return g;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The golden arrays of a case, or null when there are none or they were made from another
// version of the kernel or launch (then regenerate: bench/gpu_golden/run.sh).
const std::map<std::string, Words>* current_golden(const Case& c) {
  const auto it = golden().find(c.name);
  if (it == golden().end()) return nullptr;
  if (it->second.fingerprint != fingerprint(c, read_file(std::string(QGPU_KERNEL_DIR) + "/" + c.file))) {
    std::cout << "note: the GPU golden of " << c.name << " is stale (kernel or launch changed); not compared\n";
    return nullptr;
  }
  return &it->second.arrays;
}

class SelfCheck : public ::testing::Test {
 public:
  explicit SelfCheck(const Case& c) : case_(c) {}
  void TestBody() override {
    for (const auto& p : validate(case_)) ADD_FAILURE() << p;
    const std::string source = read_file(std::string(QGPU_KERNEL_DIR) + "/" + case_.file);
    ASSERT_FALSE(source.empty()) << "cannot read " << case_.file;
    if (!case_.kernel.empty() && case_.pass_kernel && case_.kernel != "no_such_kernel") {
      EXPECT_NE(source.find("__global__ void " + case_.kernel + "("), std::string::npos)
          << case_.file << " has no kernel " << case_.kernel;
    }
    if (case_.rejected()) {
      EXPECT_NO_THROW(std::regex(case_.expect_error, std::regex::icase)) << "bad expect_error regex";
      return;
    }
    std::vector<std::pair<std::string, Words>> expected;
    ASSERT_NO_THROW(expected = case_.expected()) << "the reference failed";
    // The second implementation: the kernel itself, compiled as host C++ and emulated.
    Launch emulated = case_.launch;
    const std::string problem = emu::run(case_.kernel, emulated);
    ASSERT_EQ(problem, "") << "emulating " << case_.kernel;
    std::size_t k = 0;
    for (const auto& a : emulated.args) {
      if (!a.is_array) continue;
      EXPECT_TRUE(same_words("emulated '" + a.name + "' vs reference", expected.at(k).second, a.values));
      ++k;
    }
    const auto* g = current_golden(case_);
    if (g == nullptr) return;
    for (const auto& [name, words] : expected) {
      const auto it = g->find(name);
      if (it == g->end()) {
        ADD_FAILURE() << "GPU golden lacks array '" << name << "'";
        continue;
      }
      EXPECT_TRUE(same_words("GPU golden '" + name + "' vs reference", words, it->second));
    }
  }

 private:
  const Case& case_;
};

// Where a launch's kernel comes from: the .cu (clang-16 inside the frontend) or nvcc's PTX.
enum class Producer { kClang, kNvcc };

// ptx-nvcc/NAME.ptx for cu/NAME.cu.
std::string nvcc_ptx_path(const std::string& cu_file) {
  return std::string(QGPU_NVCC_PTX_DIR) + "/" + std::filesystem::path(cu_file).stem().string() + ".ptx";
}

class HostRun : public ::testing::Test {
 public:
  HostRun(const Case& c, Producer producer) : case_(c), producer_(producer) {}
  void TestBody() override {
    const bool nvcc = producer_ == Producer::kNvcc;
    if (nvcc && !case_.clang_only.empty()) GTEST_SKIP() << "clang-only case: " << case_.clang_only;
    const std::string file = nvcc ? nvcc_ptx_path(case_.file) : std::string(QGPU_KERNEL_DIR) + "/" + case_.file;
    // The suite's default sizes, or the circuit's full sizes for a case that needs them.
    const char* config = case_.full_size ? QGPU_FULL_CONFIG : QGPU_CONFIG;
    std::vector<std::string> argv = {QGPU_HOST, "--config", config, "run", file};
    for (auto& a : case_.cli_args(/*ptx_names=*/nvcc)) argv.push_back(a);
    // Every launch that must run also under the race checker: the suite's kernels are race-free CUDA,
    // so a report is either a race in a kernel or a false alarm of the checker. (The rejection cases
    // test their own error, which a race found first would hide.)
    if (!case_.rejected()) argv.push_back("--racecheck");
    const ProcessResult r = run_process(argv);
    SCOPED_TRACE("command: " + quote_command(argv));
    if (case_.rejected()) {
      EXPECT_NE(r.exit_code, 0) << "the launch must be rejected; stdout: " << r.out;
      ASSERT_FALSE(r.err.empty()) << "no error message";
      const std::size_t first_newline = r.err.find('\n');
      EXPECT_TRUE(first_newline == std::string::npos || first_newline + 1 == r.err.size())
          << "the error must be one line, got:\n"
          << r.err;
      EXPECT_TRUE(std::regex_search(r.err, std::regex(case_.expect_error, std::regex::icase)))
          << "the error does not match /" << case_.expect_error << "/: " << r.err;
      std::cout << "rejected as expected: " << r.err;
      return;
    }
    ASSERT_EQ(r.exit_code, 0) << "stderr: " << r.err;
    // ordered_json keeps the output's order of arrays (parameter order).
    const auto doc = nlohmann::ordered_json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(doc.is_object()) << "stdout is not one JSON object: " << r.out;
    ASSERT_TRUE(doc.contains("arrays") && doc["arrays"].is_object()) << "no \"arrays\" object: " << r.out;
    const auto& arrays = doc["arrays"];
    const auto expected = case_.expected();
    // The CLI contract: arrays are keyed by their CUDA parameter names, or for PTX (which has
    // none) by param<i>, i the position in the table's argument order.
    auto key = [&](const std::string& name) { return nvcc ? case_.ptx_param_name(name) : name; };
    for (const auto& e : expected) {
      ASSERT_TRUE(arrays.contains(key(e.first)))
          << "no array named '" << key(e.first) << "' (CUDA '" << e.first << "') in " << arrays.dump();
    }
    const auto* g = current_golden(case_);
    for (const auto& [name, words] : expected) {
      const auto& value = arrays[key(name)];
      const auto got = to_words(value);
      if (!got) {
        ADD_FAILURE() << "array '" << name << "' is not a list of int32 words";
        continue;
      }
      EXPECT_TRUE(same_words("interpreter '" + name + "' vs reference", words, *got));
      if (g != nullptr && g->count(name)) {
        EXPECT_TRUE(same_words("interpreter '" + name + "' vs GPU golden", g->at(name), *got));
      }
    }
  }

 private:
  const Case& case_;
  Producer producer_;
};

// FNV-1a 64 of a file's bytes as 16 hex digits; make_nvcc_ptx.sh computes the same in Python.
std::string fnv1a64_hex(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : bytes) h = (h ^ ch) * 1099511628211ull;
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << h;
  return os.str();
}

TEST(kernels_selfcheck, fnv1a64_known_vectors) {
  // The published FNV-1a 64 test vectors.
  EXPECT_EQ(fnv1a64_hex(""), "cbf29ce484222325");
  EXPECT_EQ(fnv1a64_hex("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(fnv1a64_hex("foobar"), "85944171f73967e8");
}

// Every cu/NAME.cu has ptx-nvcc/NAME.ptx whose header records the hash of the current source,
// and no .ptx outlives its .cu.
TEST(kernels_selfcheck, nvcc_ptx_up_to_date) {
  namespace fs = std::filesystem;
  const std::string fix = "; regenerate with tests/kernels/tools/make_nvcc_ptx.sh";
  const std::string key = "// qgpu-source-fnv1a64: ";
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(QGPU_KERNEL_DIR)) {
    if (entry.path().extension() != ".cu") continue;
    const std::string name = entry.path().stem().string();
    const std::string ptx_path = nvcc_ptx_path(entry.path().filename().string());
    std::ifstream ptx(ptx_path);
    if (!ptx) {
      ADD_FAILURE() << "cu/" << name << ".cu has no ptx-nvcc/" << name << ".ptx" << fix;
      continue;
    }
    std::string recorded;
    std::string line;
    for (int n = 0; n < 8 && std::getline(ptx, line); ++n)
      if (line.rfind(key, 0) == 0) recorded = line.substr(key.size());
    const std::string actual = fnv1a64_hex(read_file(entry.path().string()));
    if (recorded.empty()) {
      ADD_FAILURE() << "ptx-nvcc/" << name << ".ptx has no '" << key << "' header line" << fix;
    } else if (recorded != actual) {
      ADD_FAILURE() << "ptx-nvcc/" << name << ".ptx is stale (made from source hash " << recorded << ", cu/" << name
                    << ".cu now hashes to " << actual << ")" << fix;
    }
    ++checked;
  }
  for (const auto& entry : fs::directory_iterator(QGPU_NVCC_PTX_DIR)) {
    if (entry.path().extension() != ".ptx") continue;
    const std::string name = entry.path().stem().string();
    EXPECT_TRUE(fs::exists(fs::path(QGPU_KERNEL_DIR) / (name + ".cu")))
        << "ptx-nvcc/" << name << ".ptx has no cu/" << name << ".cu" << fix;
  }
  EXPECT_GT(checked, 0) << "no .cu files in " << QGPU_KERNEL_DIR;
}

// The emulator must notice what would make a launch wrong on a real GPU, or the self-check
// could pass kernels that are not valid CUDA.
const Case& find_case(const std::string& name) {
  for (const Case& c : all_cases())
    if (c.name == name) return c;
  throw std::out_of_range("no case " + name);
}

TEST(kernels_emulator, detects_shuffle_mask_without_the_calling_lane) {
  Launch l = find_case("warp_shfl_idx").launch;  // mask 0xf: only valid for 4-thread blocks
  l.grid = 1;
  l.block = 8;
  EXPECT_NE(emu::run("warp_shfl_idx", l).find("mask"), std::string::npos);
}

TEST(kernels_emulator, detects_out_of_bounds_writes) {
  Launch l = find_case("unguarded_copy_exact").launch;
  l.block = 5;  // 10 threads, 8 words
  l.array("in").resize(10);
  EXPECT_NE(emu::run("unguarded_copy", l).find("outside array 'out'"), std::string::npos);
}

TEST(kernels_emulator, reproduces_a_known_launch) {
  Launch l = find_case("dot_atomic_123_456").launch;  // [1,2,3].[4,5,6] = 32, worked by hand
  ASSERT_EQ(emu::run("dot_atomic", l), "");
  EXPECT_EQ(l.array("result"), Words{32});
}

void register_tests() {
  for (const Case& c : all_cases()) {
    ::testing::RegisterTest("kernels_selfcheck", c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [&c]() -> ::testing::Test* { return new SelfCheck(c); });
    ::testing::RegisterTest("kernels", c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [&c]() -> ::testing::Test* { return new HostRun(c, Producer::kClang); });
    ::testing::RegisterTest("kernels_nvcc", c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [&c]() -> ::testing::Test* { return new HostRun(c, Producer::kNvcc); });
  }
}

}  // namespace
}  // namespace qgpu::kernels

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--list-json") {
      std::cout << qgpu::kernels::cases_json([](const qgpu::kernels::Case& c) {
        return qgpu::kernels::read_file(std::string(QGPU_KERNEL_DIR) + "/" + c.file);
      });
      return 0;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  qgpu::kernels::register_tests();
  return RUN_ALL_TESTS();
}
