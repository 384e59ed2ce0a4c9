// Runs every accepted case of the kernel suite (tests/kernels/suite.cpp, the same table the tests
// use) on a real NVIDIA GPU and writes the final arrays as golden.json. The kernels are compiled
// beforehand by run.sh (nvcc -cubin, one file per tests/kernels/cu/*.cu); this program loads them
// with the CUDA driver API, launches each case with its grid, block and arguments, copies every
// array back and also compares it with the suite's C++ reference.
//
// Usage: golden_runner SOURCE_DIR CUBIN_DIR OUT_JSON [NVCC_VERSION]
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "suite.h"

namespace {

using qgpu::kernels::Case;
using qgpu::kernels::Words;

std::string cu_error(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  return std::string(name ? name : "CUDA error") + " (" + (text ? text : "?") + ")";
}

// Throws on a failed driver call, naming the call.
void check(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) throw std::runtime_error(what + ": " + cu_error(r));
}

std::string json_string(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

std::string json_words(const Words& w) {
  std::string out = "[";
  for (std::size_t i = 0; i < w.size(); ++i) out += (i ? "," : "") + std::to_string(w[i]);
  return out + "]";
}

std::string stem(const std::string& file) {
  return file.substr(0, file.rfind('.'));
}

// One launch on the GPU: returns the final arrays in argument order.
std::vector<std::pair<std::string, Words>> launch_on_gpu(const Case& c, CUfunction fn) {
  const auto& args = c.launch.args;
  std::vector<CUdeviceptr> device(args.size(), 0);
  std::vector<int> scalars(args.size(), 0);
  std::vector<void*> params(args.size(), nullptr);
  struct Free {
    std::vector<CUdeviceptr>& d;
    ~Free() {
      for (auto p : d)
        if (p) cuMemFree(p);
    }
  } free_all{device};
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_array) {
      const std::size_t bytes = args[i].values.size() * sizeof(std::int32_t);
      check(cuMemAlloc(&device[i], bytes), "cuMemAlloc " + args[i].name);
      check(cuMemcpyHtoD(device[i], args[i].values.data(), bytes), "copy in " + args[i].name);
      params[i] = &device[i];
    } else {
      scalars[i] = args[i].values.at(0);
      params[i] = &scalars[i];
    }
  }
  check(cuLaunchKernel(fn, static_cast<unsigned>(c.launch.grid), static_cast<unsigned>(c.launch.grid_y), 1,
                       static_cast<unsigned>(c.launch.block), static_cast<unsigned>(c.launch.block_y), 1, 0, nullptr,
                       params.data(), nullptr),
        "launch");
  check(cuCtxSynchronize(), "synchronize after the launch");
  std::vector<std::pair<std::string, Words>> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_array) continue;
    Words w(args[i].values.size());
    check(cuMemcpyDtoH(w.data(), device[i], w.size() * sizeof(std::int32_t)), "copy out " + args[i].name);
    out.emplace_back(args[i].name, std::move(w));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: golden_runner SOURCE_DIR CUBIN_DIR OUT_JSON [NVCC_VERSION]\n";
    return 2;
  }
  const std::string source_dir = argv[1], cubin_dir = argv[2], out_path = argv[3];
  const std::string nvcc_version = argc > 4 ? argv[4] : "";
  const auto started = std::chrono::steady_clock::now();
  try {
    check(cuInit(0), "cuInit");
    CUdevice dev;
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    char name[256] = {};
    check(cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    int major = 0, minor = 0, driver = 0;
    check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "compute capability");
    check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "compute capability");
    check(cuDriverGetVersion(&driver), "cuDriverGetVersion");
    CUcontext ctx;
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

    std::map<std::string, CUmodule> modules;
    std::ostringstream cases;
    int ran = 0, failed = 0, disagree = 0;
    for (const Case& c : qgpu::kernels::all_cases()) {
      if (c.rejected()) continue;
      try {
        auto it = modules.find(c.file);
        if (it == modules.end()) {
          CUmodule m;
          const std::string path = cubin_dir + "/" + stem(c.file) + ".cubin";
          check(cuModuleLoad(&m, path.c_str()), "load " + path);
          it = modules.emplace(c.file, m).first;
        }
        CUfunction fn;
        check(cuModuleGetFunction(&fn, it->second, c.kernel.c_str()), "find kernel " + c.kernel);
        const auto got = launch_on_gpu(c, fn);
        const auto expected = c.expected();
        std::string arrays;
        for (std::size_t i = 0; i < got.size(); ++i) {
          arrays += (i ? ", " : "") + json_string(got[i].first) + ": " + json_words(got[i].second);
          if (got[i].second != expected.at(i).second) {
            ++disagree;
            std::cout << "DISAGREE " << c.name << ": array '" << got[i].first << "' GPU " << json_words(got[i].second)
                      << " reference " << json_words(expected.at(i).second) << "\n";
          }
        }
        std::ifstream src(source_dir + "/" + c.file);
        std::stringstream text;
        text << src.rdbuf();
        if (!src) throw std::runtime_error("cannot read " + source_dir + "/" + c.file);
        cases << (ran ? ",\n" : "\n") << "    " << json_string(c.name)
              << ": {\"fingerprint\": " << json_string(qgpu::kernels::fingerprint(c, text.str()))
              << ", \"file\": " << json_string(c.file) << ", \"kernel\": " << json_string(c.kernel)
              << ", \"grid\": " << c.launch.grid << ", \"block\": " << c.launch.block << ", \"arrays\": {" << arrays
              << "}}";
        ++ran;
      } catch (const std::exception& e) {
        ++failed;
        std::cout << "FAILED " << c.name << ": " << e.what() << "\n";
        // A failed launch can leave the context unusable; say so and stop rather than record garbage.
        if (cuCtxSynchronize() != CUDA_SUCCESS) throw std::runtime_error("the CUDA context is broken after " + c.name);
      }
    }
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::ofstream out(out_path);
    out << "{\n  \"format\": \"qgpu-gpu-golden/1\",\n  \"gpu\": " << json_string(name)
        << ",\n  \"compute_capability\": \"" << major << "." << minor << "\",\n  \"cuda_driver_version\": \""
        << driver / 1000 << "." << (driver % 1000) / 10 << "\",\n  \"nvcc\": " << json_string(nvcc_version)
        << ",\n  \"generated\": \"" << stamp << "\",\n  \"regenerate\": \"bash bench/gpu_golden/run.sh\""
        << ",\n  \"cases\": {" << cases.str() << "\n  }\n}\n";
    if (!out) throw std::runtime_error("cannot write " + out_path);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf(
        "golden_runner: %s (sm_%d%d): %d cases recorded, %d failed, %d arrays disagree with the reference; "
        "%.1f s -> %s\n",
        name, major, minor, ran, failed, disagree, seconds, out_path.c_str());
    return failed == 0 && disagree == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "golden_runner: error: " << e.what() << "\n";
    return 1;
  }
}
