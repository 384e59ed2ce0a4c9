// A library loaded with dlopen whose thread_local variables live in dynamic TLS: glibc (>= 2.25)
// allocates each thread's block of them with malloc on first use. tests/sanitize/dynamic_tls.cpp
// loads it; docs/SANITIZERS.md says why.
#include <cstdlib>

// 32 bytes, one small malloc'ed block per thread; external, so every access goes through
// __tls_get_addr.
extern "C" thread_local long qgpu_test_tls_block[4];
thread_local long qgpu_test_tls_block[4];

namespace {

void* volatile lost = nullptr;

}  // namespace

extern "C" long qgpu_test_touch_tls() {
  qgpu_test_tls_block[0] = 1;
  return qgpu_test_tls_block[0];
}

// Leaks a 1,234-byte block: its only pointer is overwritten.
extern "C" void qgpu_test_leak() {
  lost = std::malloc(1234);
  lost = nullptr;
}
