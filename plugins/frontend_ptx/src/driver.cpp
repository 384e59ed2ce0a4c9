// CUDA C -> PTX through a clang-16 subprocess, the prelude's location, and
// the language dispatch. No MLIR here.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "pipeline.h"
#include "source_names.h"

extern char** environ;

namespace qgpu::ptx {
namespace fs = std::filesystem;

namespace {

// A private temporary directory, removed with its contents when this goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string templ = (base / "qgpu-ptx-XXXXXX").string();
    if (char* made = ::mkdtemp(templ.data())) path_ = made;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs argv[0] with stdout and stderr sent to `log`; returns the exit status or an error.
sdk::Expected<int> run_process(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return sdk::io_error("cannot run '" + argv[0] + "': " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return sdk::io_error("waiting for '" + argv[0] + "' failed: " + std::strerror(errno));
  }
  if (WIFSIGNALED(status))
    return sdk::io_error("'" + argv[0] + "' was killed by signal " + std::to_string(WTERMSIG(status)));
  return WEXITSTATUS(status);
}

// The first "file:line:col: error: message" line of clang's output as a Status.
sdk::Status clang_error(const std::string& output, const std::string& source) {
  std::istringstream in(output);
  std::string line, first;
  while (std::getline(in, line)) {
    if (first.empty() && !line.empty()) first = line;
    const auto at = line.find(": error: ");
    if (at != std::string::npos) {
      std::string location = line.substr(0, at);
      std::string message = line.substr(at + 9);
      if (location == "clang" || location.find("clang++") != std::string::npos) {
        return sdk::invalid_argument("clang: " + message);
      }
      return sdk::error_at(location, sdk::ErrorCode::kParseError, message);
    }
    if (line.starts_with("error: ") || line.starts_with("clang: error: ")) {
      return sdk::invalid_argument("clang: " + line.substr(line.find("error: ") + 7));
    }
  }
  return sdk::invalid_argument("clang failed on '" + source + "'" + (first.empty() ? "" : ": " + first));
}

std::string directory_of_this_code() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_prelude), &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::path(info.dli_fname), ec);
  return p.parent_path().string();
}

}  // namespace

// Finds an executable on PATH (or checks an explicit path); "" when absent.
std::string find_program(const std::string& name) {
  std::error_code ec;
  if (name.find('/') != std::string::npos) return fs::exists(name, ec) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "";
  while (!rest.empty()) {
    auto colon = rest.find(':');
    fs::path candidate = fs::path(std::string(rest.substr(0, colon))) / name;
    if (fs::exists(candidate, ec)) return candidate.string();
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return {};
}

sdk::Expected<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return sdk::not_found("no such file: '" + path + "'");
  if (fs::is_directory(path, ec)) return sdk::invalid_argument("'" + path + "' is a directory, not a source file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return sdk::io_error("cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return sdk::io_error("error while reading '" + path + "'");
  return ss.str();
}

sdk::Expected<std::string> find_prelude() {
  constexpr const char* kName = "qgpu_cuda_prelude.h";
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("QGPU_CUDA_PRELUDE"); env && *env) candidates.emplace_back(env);
  const std::string dir = directory_of_this_code();
  if (!dir.empty()) {
    candidates.push_back(fs::path(dir) / kName);
    candidates.push_back(fs::path(dir) / QGPU_PRELUDE_FROM_PLUGIN_DIR / kName);
    candidates.push_back(fs::path(dir) / QGPU_PRELUDE_FROM_BIN_DIR / kName);
  }
  std::string tried;
  for (const fs::path& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c, ec).string();
    tried += (tried.empty() ? "" : ", ") + c.lexically_normal().string();
  }
  return sdk::not_found(std::string("CUDA prelude '") + kName + "' not found (looked in: " + tried +
                        "; set QGPU_CUDA_PRELUDE to its path)");
}

sdk::Expected<std::string> cuda_to_ptx(const std::string& cuda_path, const ClangOptions& options) {
  std::error_code ec;
  if (!fs::exists(cuda_path, ec)) return sdk::not_found("no such file: '" + cuda_path + "'");
  const std::string clang = find_program(options.clang);
  if (clang.empty()) {
    return sdk::not_found("clang driver '" + options.clang + "' not found on PATH (frontend option 'clang')");
  }
  std::string prelude = options.prelude;
  if (prelude.empty()) {
    auto found = find_prelude();
    if (!found) return found.error();
    prelude = *found;
  }
  TempDir tmp;
  if (tmp.path().empty())
    return sdk::io_error(std::string("cannot create a temporary directory: ") + std::strerror(errno));
  const std::string out = tmp.path() + "/kernel.ptx";
  const std::string log = tmp.path() + "/clang.log";
  std::vector<std::string> argv = {clang,
                                   "-x",
                                   "cuda",
                                   "--cuda-device-only",
                                   "-nocudainc",
                                   "-nocudalib",
                                   "--cuda-path=/nonexistent",
                                   "--cuda-feature=" + options.ptx_features,
                                   "--cuda-gpu-arch=" + options.gpu_arch,
                                   "-O" + std::to_string(options.opt_level)};
  if (options.line_tables) argv.push_back("-gline-tables-only");
  argv.insert(argv.end(), options.extra_flags.begin(), options.extra_flags.end());
  for (const std::string& a :
       {std::string("-include"), prelude, std::string("-S"), cuda_path, std::string("-o"), out}) {
    argv.push_back(a);
  }
  auto rc = run_process(argv, log);
  if (!rc) return rc.error();
  auto output = read_text_file(log);
  if (*rc != 0) return clang_error(output ? *output : std::string(), cuda_path);
  return read_text_file(out);
}

namespace {

// Kernels are known by their source names (source_names.h), not by mangled PTX names.
void name_kernels(sdk::KernelModule& module) {
  std::vector<std::string> entries;
  for (const sdk::KernelIR& k : module.kernels) entries.push_back(k.name);
  const std::vector<std::string> names = kernel_source_names(entries);
  for (std::size_t i = 0; i < names.size(); ++i) module.kernels[i].name = names[i];
}

bool starts_with_any(const std::string& s, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes)
    if (s.starts_with(p)) return true;
  return false;
}

}  // namespace

sdk::Expected<std::vector<std::string>> parse_clang_flags(const std::string& text) {
  std::vector<std::string> flags;
  std::istringstream in(text);
  std::string flag;
  while (in >> flag) flags.push_back(flag);
  auto refuse = [](const std::string& f, const std::string& why) {
    return sdk::invalid_argument("frontend option clang_flags: '" + f + "' is not allowed (" + why + ")");
  };
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    if (f.find_first_of("\"'`$") != std::string::npos)
      return refuse(f, "flags are split at white space; quotes and shell syntax are not interpreted");
    if (f == "-mllvm") {
      if (i + 1 == flags.size()) return refuse(f, "it needs an LLVM option after it, e.g. -mllvm -unroll-threshold=0");
      ++i;
      continue;
    }
    if (starts_with_any(f, {"-Wl,", "-Wp,", "-Wa,", "-Xclang", "-fplugin", "-fpass-plugin", "-fsyntax-only",
                            "-fdriver-only", "-fno-gpu-rdc", "-fgpu-rdc", "-fcuda", "-fno-cuda"}))
      return refuse(f, "it changes what clang produces");
    if (f == "-D" || f == "-U" || f == "-I")
      return refuse(f, "write the value joined to the flag, e.g. -DN=4 or -I/path");
    if (starts_with_any(f, {"-D", "-U", "-I", "-f", "-W", "-std="}) || f == "-w") continue;
    if (f.starts_with("-O")) return refuse(f, "set the frontend option opt_level instead");
    if (f.starts_with("--cuda-gpu-arch") || f.starts_with("--cuda-feature"))
      return refuse(f, "set the frontend options gpu_arch and ptx_features instead");
    if (!f.starts_with("-")) return refuse(f, "not a flag: the frontend passes clang one source file");
    return refuse(f,
                  "allowed: -D<macro>[=<value>] -U<macro> -I<dir> -f<option> -W<warning> -w -std=<standard> "
                  "-mllvm <option>");
  }
  return flags;
}

sdk::Expected<PipelineResult> compile_source(const sdk::SourceInput& input, const ClangOptions& clang,
                                             const PipelineOptions& options) {
  sdk::SourceLanguage lang = input.language;
  if (lang == sdk::SourceLanguage::kAuto) {
    const std::string ext = fs::path(input.path).extension().string();
    if (ext == ".cu" || ext == ".cuh")
      lang = sdk::SourceLanguage::kCuda;
    else if (ext == ".ptx")
      lang = sdk::SourceLanguage::kPtx;
    else {
      return sdk::invalid_argument("cannot tell the language of '" + input.path +
                                   "' from its extension (expected .cu or .ptx)");
    }
  }
  if (lang == sdk::SourceLanguage::kPtx) {
    auto text = read_text_file(input.path);
    if (!text) return text.error();
    auto r = compile_ptx(*text, input.path, options);
    if (!r) return r;
    r->module.source_path = input.path;
    name_kernels(r->module);
    return r;
  }
  auto ptx = cuda_to_ptx(input.path, clang);
  if (!ptx) return ptx.error();
  PipelineOptions cuda = options;
  if (clang.line_tables) cuda.debug_source = input.path;
  cuda.generated_from = input.path;
  // The generated PTX is named "<dir>/<file>.cu.ptx" when kept (frontend option keep_ptx), and only then
  // do diagnostics name it; otherwise they point at the .cu lines its .loc lines give.
  std::string ptx_path = input.path + ".ptx";
  cuda.ptx_on_disk = false;
  if (!clang.keep_ptx_dir.empty()) {
    ptx_path = (fs::path(clang.keep_ptx_dir) / (fs::path(input.path).filename().string() + ".ptx")).string();
    std::ofstream out(ptx_path, std::ios::binary);
    out << *ptx;
    if (!out.flush())
      return sdk::io_error("cannot write the generated PTX to '" + ptx_path + "' (frontend option keep_ptx)");
    cuda.ptx_on_disk = true;
  }
  auto r = compile_ptx(*ptx, ptx_path, cuda);
  if (!r) return r;
  r->module.source_path = input.path;
  for (sdk::KernelIR& kernel : r->module.kernels) {
    // Positions in generated PTX nobody can open (no .loc lines) are dropped rather than shown.
    if (kernel.source_path == ptx_path && !cuda.ptx_on_disk) {
      kernel.source_path = input.path;
      kernel.loc = {};
      for (sdk::Block& b : kernel.blocks)
        for (sdk::Instr& in : b.instrs) in.loc = {};
    }
  }
  // Give parameters the names the user wrote, so launch arguments can use them.
  auto source = read_text_file(input.path);
  if (!source) return source.error();
  for (sdk::KernelIR& kernel : r->module.kernels) {
    auto names = cuda_param_names(*source, declared_identifier(kernel.name));
    if (!names || names->size() != kernel.params.size()) continue;
    for (std::size_t i = 0; i < names->size(); ++i) {
      if (!(*names)[i].empty()) kernel.params[i].name = (*names)[i];
    }
  }
  name_kernels(r->module);
  return r;
}

}  // namespace qgpu::ptx
