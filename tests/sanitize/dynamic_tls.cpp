// The leak check of the sanitizer build on a process with dynamic TLS (docs/SANITIZERS.md).
//
//   dynamic_tls K        K small blocks kept, then the library's dynamic TLS touched; exits 0
//   dynamic_tls --leak   the same with K = 0, and a real 1,234-byte leak
//
// GCC 12's libasan (and clang 16's) follow each __tls_get_addr to record the thread's dynamic TLS
// blocks for the leak check. For a block that starts 16 bytes past a page boundary they assume
// glibc 2.19's internal allocator and read its {start, size} from the 16 bytes before the block;
// since glibc 2.25 the block comes from malloc and those bytes are ASan's own chunk header, so the
// leak check scans a made-up range at exit and crashes ("Tracer caught signal 11"; fixed upstream
// in LLVM 17). Which K puts the block there depends on the allocator (255 with GCC 12 on Debian
// 12): the test runs K over a whole period of the 48-byte size class. The sanitize preset sets
// intercept_tls_get_addr=0, which stops the recording; for every other block it records size 0
// ("Can't guess glibc version"), so nothing the leak check scans changes, and `--leak` shows the
// check still runs and reports.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

void* kept[4096];  // external linkage: the allocations are not optimised away

namespace {

void* symbol(void* library, const char* name) {
  void* address = dlsym(library, name);
  if (address == nullptr) {
    std::fprintf(stderr, "dynamic_tls: %s: %s\n", name, dlerror());
    std::exit(2);
  }
  return address;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: dynamic_tls K | --leak\n");
    return 2;
  }
  const bool leak = std::strcmp(argv[1], "--leak") == 0;
  const int k = leak ? 0 : std::atoi(argv[1]);
  if (k < 0 || k > 4096) {
    std::fprintf(stderr, "dynamic_tls: K must be 0 to 4096\n");
    return 2;
  }
  for (int i = 0; i < k; ++i) kept[i] = std::malloc(32);
  void* library = dlopen(QGPU_TLS_LIBRARY, RTLD_NOW);
  if (library == nullptr) {
    std::fprintf(stderr, "dynamic_tls: %s\n", dlerror());
    return 2;
  }
  auto touch = reinterpret_cast<long (*)()>(symbol(library, "qgpu_test_touch_tls"));
  if (touch() != 1) return 1;
  if (leak) reinterpret_cast<void (*)()>(symbol(library, "qgpu_test_leak"))();
  return 0;
}
