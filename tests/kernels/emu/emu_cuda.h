// Host C++ stand-ins for the CUDA device API the suite's kernels use, so the same .cu files
// compile as plain C++ and run as one std::thread per CUDA thread. This is the suite's second,
// independent implementation of each kernel: it checks the hand-written references (and that
// every launch is race-free and warp-legal) without our frontend or interpreter.
//
// Model: thread blocks run one after another; the threads of a block run concurrently;
// __syncthreads is a barrier over the block; shuffles exchange values between the threads of
// one 32-lane warp through a barrier, with CUDA's segment (width) rules; atomics take one lock.
#pragma once

#include <barrier>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace qgpu::kernels::emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

// Shared by the threads of one running block.
struct BlockState {
  explicit BlockState(int threads);
  std::barrier<> block_barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barrier;  // per 32-lane warp
  std::vector<int> warp_slot;                                 // one exchange slot per thread
  int threads;
};

inline thread_local Dim3 t_thread_idx, t_block_idx;
inline thread_local BlockState* t_block = nullptr;
inline Dim3 g_block_dim, g_grid_dim;
inline std::mutex g_atomic_lock;

// The first violation of CUDA's rules seen in a launch (shuffle mask problems), if any.
void report_violation(const std::string& what);

int shuffle(unsigned mask, int v, int src_lane_in_segment, bool keep_own, int width);
// The bits of the warp's threads (within mask) whose predicate is non-zero, as __ballot_sync.
unsigned ballot(unsigned mask, int predicate);

// The thread's linear index in its block (x fastest), which CUDA's warps and lanes follow.
int linear_tid();

}  // namespace qgpu::kernels::emu

#define threadIdx (::qgpu::kernels::emu::t_thread_idx)
#define blockIdx (::qgpu::kernels::emu::t_block_idx)
#define blockDim (::qgpu::kernels::emu::g_block_dim)
#define gridDim (::qgpu::kernels::emu::g_grid_dim)
#define __global__
#define __device__ static inline
#define __shared__ static  // blocks run one at a time, so a static array is one block's shared memory

inline void __syncthreads() {
  ::qgpu::kernels::emu::t_block->block_barrier.arrive_and_wait();
}

// --- Atomics: one lock for all of them is enough for a reference model.
#define QGPU_EMU_ATOMIC(NAME, T, EXPR)                                      \
  inline T NAME(T* p, T v) {                                                \
    std::lock_guard<std::mutex> guard(::qgpu::kernels::emu::g_atomic_lock); \
    T old = *p;                                                             \
    *p = (EXPR);                                                            \
    return old;                                                             \
  }
QGPU_EMU_ATOMIC(atomicAdd, int, static_cast<int>(static_cast<unsigned>(old) + static_cast<unsigned>(v)))
QGPU_EMU_ATOMIC(atomicAdd, unsigned, old + v)
QGPU_EMU_ATOMIC(atomicSub, int, static_cast<int>(static_cast<unsigned>(old) - static_cast<unsigned>(v)))
QGPU_EMU_ATOMIC(atomicSub, unsigned, old - v)
QGPU_EMU_ATOMIC(atomicExch, int, v)
QGPU_EMU_ATOMIC(atomicExch, unsigned, v)
QGPU_EMU_ATOMIC(atomicMin, int, v < old ? v : old)
QGPU_EMU_ATOMIC(atomicMin, unsigned, v < old ? v : old)
QGPU_EMU_ATOMIC(atomicMax, int, v > old ? v : old)
QGPU_EMU_ATOMIC(atomicMax, unsigned, v > old ? v : old)
QGPU_EMU_ATOMIC(atomicAnd, int, old& v)
QGPU_EMU_ATOMIC(atomicAnd, unsigned, old& v)
QGPU_EMU_ATOMIC(atomicOr, int, old | v)
QGPU_EMU_ATOMIC(atomicOr, unsigned, old | v)
QGPU_EMU_ATOMIC(atomicXor, int, old ^ v)
QGPU_EMU_ATOMIC(atomicXor, unsigned, old ^ v)
QGPU_EMU_ATOMIC(atomicInc, unsigned, old >= v ? 0u : old + 1u)
QGPU_EMU_ATOMIC(atomicDec, unsigned, (old == 0u || old > v) ? v : old - 1u)
#undef QGPU_EMU_ATOMIC

template <class T>
inline T atomicCAS(T* p, T cmp, T v) {
  std::lock_guard<std::mutex> guard(::qgpu::kernels::emu::g_atomic_lock);
  T old = *p;
  if (old == cmp) *p = v;
  return old;
}

// --- Shuffles, with CUDA's rules for a segment of `width` lanes.
inline int __shfl_sync(unsigned m, int v, int lane, int width = 32) {
  return ::qgpu::kernels::emu::shuffle(m, v, ((lane % width) + width) % width, false, width);
}
inline int __shfl_up_sync(unsigned m, int v, unsigned d, int width = 32) {
  const int lane = ::qgpu::kernels::emu::linear_tid() % 32 % width;
  const int src = lane - static_cast<int>(d);
  return ::qgpu::kernels::emu::shuffle(m, v, src, src < 0, width);
}
inline int __shfl_down_sync(unsigned m, int v, unsigned d, int width = 32) {
  const int lane = ::qgpu::kernels::emu::linear_tid() % 32 % width;
  const int src = lane + static_cast<int>(d);
  return ::qgpu::kernels::emu::shuffle(m, v, src, src >= width, width);
}
inline int __shfl_xor_sync(unsigned m, int v, int lm, int width = 32) {
  const int lane = ::qgpu::kernels::emu::linear_tid() % 32 % width;
  const int src = lane ^ lm;
  return ::qgpu::kernels::emu::shuffle(m, v, src, src >= width, width);
}

// --- Votes, with the same mask rules as shuffles.
inline unsigned __ballot_sync(unsigned m, int p) {
  return ::qgpu::kernels::emu::ballot(m, p);
}

// --- Integer intrinsics.
inline int __popc(unsigned x) {
  return std::popcount(x);
}
inline int __clz(int x) {
  return std::countl_zero(static_cast<unsigned>(x));
}
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int b = 0; b < 32; ++b, x >>= 1) r = (r << 1) | (x & 1u);
  return r;
}
inline int __ffs(int x) {
  return x == 0 ? 0 : std::countr_zero(static_cast<unsigned>(x)) + 1;
}
inline int __mulhi(int a, int b) {
  return static_cast<int>((static_cast<long long>(a) * b) >> 32);
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline unsigned min(unsigned a, unsigned b) {
  return a < b ? a : b;
}
inline int max(int a, int b) {
  return a > b ? a : b;
}
inline unsigned max(unsigned a, unsigned b) {
  return a > b ? a : b;
}
inline unsigned umin(unsigned a, unsigned b) {
  return a < b ? a : b;
}
inline unsigned umax(unsigned a, unsigned b) {
  return a > b ? a : b;
}
using std::abs;
