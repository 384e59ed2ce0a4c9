// qgpu CUDA prelude: lets clang-16 compile plain CUDA C to PTX without a CUDA SDK.
//
// The frontend passes this file with `-include`, so user kernels stay valid CUDA for nvcc. It defines
// the CUDA keywords as clang attributes, pulls in clang's threadIdx/blockIdx/... and maps the
// integer intrinsics qgpu supports onto clang's NVPTX builtins.
#pragma once

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

#include <__clang_cuda_builtin_vars.h>

#define QGPU_DEV static __device__ __forceinline__

// Device printf, declared as CUDA's headers declare it, so that a kernel using it compiles (clang lowers
// it to a vprintf call) and the frontend refuses that call with one line at its CUDA line instead of
// clang's "undeclared identifier". Compatible with <cstdio>'s host declaration.
extern "C" __device__ int printf(const char*, ...);

// --- atomics (generic address space, like CUDA's)
QGPU_DEV int atomicAdd(int* p, int v) {
  return __nvvm_atom_add_gen_i(p, v);
}
QGPU_DEV unsigned atomicAdd(unsigned* p, unsigned v) {
  return __nvvm_atom_add_gen_i((int*)p, (int)v);
}
QGPU_DEV int atomicSub(int* p, int v) {
  return __nvvm_atom_add_gen_i(p, -v);
}
QGPU_DEV unsigned atomicSub(unsigned* p, unsigned v) {
  return __nvvm_atom_add_gen_i((int*)p, -(int)v);
}
QGPU_DEV int atomicMin(int* p, int v) {
  return __nvvm_atom_min_gen_i(p, v);
}
QGPU_DEV unsigned atomicMin(unsigned* p, unsigned v) {
  return __nvvm_atom_min_gen_ui(p, v);
}
QGPU_DEV int atomicMax(int* p, int v) {
  return __nvvm_atom_max_gen_i(p, v);
}
QGPU_DEV unsigned atomicMax(unsigned* p, unsigned v) {
  return __nvvm_atom_max_gen_ui(p, v);
}
QGPU_DEV int atomicExch(int* p, int v) {
  return __nvvm_atom_xchg_gen_i(p, v);
}
QGPU_DEV unsigned atomicExch(unsigned* p, unsigned v) {
  return __nvvm_atom_xchg_gen_i((int*)p, (int)v);
}
QGPU_DEV int atomicCAS(int* p, int cmp, int v) {
  return __nvvm_atom_cas_gen_i(p, cmp, v);
}
QGPU_DEV unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
  return __nvvm_atom_cas_gen_i((int*)p, (int)cmp, (int)v);
}
QGPU_DEV int atomicAnd(int* p, int v) {
  return __nvvm_atom_and_gen_i(p, v);
}
QGPU_DEV unsigned atomicAnd(unsigned* p, unsigned v) {
  return __nvvm_atom_and_gen_i((int*)p, (int)v);
}
QGPU_DEV int atomicOr(int* p, int v) {
  return __nvvm_atom_or_gen_i(p, v);
}
QGPU_DEV unsigned atomicOr(unsigned* p, unsigned v) {
  return __nvvm_atom_or_gen_i((int*)p, (int)v);
}
QGPU_DEV int atomicXor(int* p, int v) {
  return __nvvm_atom_xor_gen_i(p, v);
}
QGPU_DEV unsigned atomicXor(unsigned* p, unsigned v) {
  return __nvvm_atom_xor_gen_i((int*)p, (int)v);
}
QGPU_DEV unsigned atomicInc(unsigned* p, unsigned v) {
  return __nvvm_atom_inc_gen_ui(p, v);
}
QGPU_DEV unsigned atomicDec(unsigned* p, unsigned v) {
  return __nvvm_atom_dec_gen_ui(p, v);
}

// --- warp shuffles; `width` packs into PTX's c operand as CUDA does
#define QGPU_SHFL_C_DOWN(width) (((32 - (width)) << 8) | 0x1f)
#define QGPU_SHFL_C_UP(width) ((32 - (width)) << 8)
QGPU_DEV int __shfl_sync(unsigned mask, int v, int lane, int width = 32) {
  return __nvvm_shfl_sync_idx_i32(mask, v, lane, QGPU_SHFL_C_DOWN(width));
}
QGPU_DEV unsigned __shfl_sync(unsigned mask, unsigned v, int lane, int width = 32) {
  return (unsigned)__nvvm_shfl_sync_idx_i32(mask, (int)v, lane, QGPU_SHFL_C_DOWN(width));
}
QGPU_DEV int __shfl_up_sync(unsigned mask, int v, unsigned delta, int width = 32) {
  return __nvvm_shfl_sync_up_i32(mask, v, (int)delta, QGPU_SHFL_C_UP(width));
}
QGPU_DEV unsigned __shfl_up_sync(unsigned mask, unsigned v, unsigned delta, int width = 32) {
  return (unsigned)__nvvm_shfl_sync_up_i32(mask, (int)v, (int)delta, QGPU_SHFL_C_UP(width));
}
QGPU_DEV int __shfl_down_sync(unsigned mask, int v, unsigned delta, int width = 32) {
  return __nvvm_shfl_sync_down_i32(mask, v, (int)delta, QGPU_SHFL_C_DOWN(width));
}
QGPU_DEV unsigned __shfl_down_sync(unsigned mask, unsigned v, unsigned delta, int width = 32) {
  return (unsigned)__nvvm_shfl_sync_down_i32(mask, (int)v, (int)delta, QGPU_SHFL_C_DOWN(width));
}
QGPU_DEV int __shfl_xor_sync(unsigned mask, int v, int lane_mask, int width = 32) {
  return __nvvm_shfl_sync_bfly_i32(mask, v, lane_mask, QGPU_SHFL_C_DOWN(width));
}
QGPU_DEV unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask, int width = 32) {
  return (unsigned)__nvvm_shfl_sync_bfly_i32(mask, (int)v, lane_mask, QGPU_SHFL_C_DOWN(width));
}

// --- votes
QGPU_DEV unsigned __ballot_sync(unsigned mask, int pred) {
  return __nvvm_vote_ballot_sync(mask, pred != 0);
}
QGPU_DEV int __all_sync(unsigned mask, int pred) {
  return __nvvm_vote_all_sync(mask, pred != 0);
}
QGPU_DEV int __any_sync(unsigned mask, int pred) {
  return __nvvm_vote_any_sync(mask, pred != 0);
}
QGPU_DEV int __uni_sync(unsigned mask, int pred) {
  return __nvvm_vote_uni_sync(mask, pred != 0);
}

// The threads of the warp executing this (CUDA's headers use the same inline PTX).
QGPU_DEV unsigned __activemask() {
  unsigned r;
  asm volatile("activemask.b32 %0;" : "=r"(r));
  return r;
}

// --- warp synchronisation (bar.warp.sync; the machine decides what synchronises a CUDA warp)
QGPU_DEV void __syncwarp(unsigned mask = 0xffffffffu) {
  __nvvm_bar_warp_sync(mask);
}

// --- bit manipulation (CUDA semantics: __clz(0) == 32)
QGPU_DEV int __popc(unsigned x) {
  return __builtin_popcount(x);
}
QGPU_DEV int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz((unsigned)x);
}
QGPU_DEV unsigned __brev(unsigned x) {
  return __builtin_bitreverse32(x);
}

QGPU_DEV int __ffs(int x) {
  return x == 0 ? 0 : __builtin_ctz((unsigned)x) + 1;
}
QGPU_DEV int __mulhi(int a, int b) {
  return (int)(((long long)a * (long long)b) >> 32);
}
QGPU_DEV unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * (unsigned long long)b) >> 32);
}

// --- min/max
QGPU_DEV unsigned umin(unsigned a, unsigned b) {
  return a < b ? a : b;
}
QGPU_DEV unsigned umax(unsigned a, unsigned b) {
  return a > b ? a : b;
}
QGPU_DEV int min(int a, int b) {
  return a < b ? a : b;
}
QGPU_DEV unsigned min(unsigned a, unsigned b) {
  return a < b ? a : b;
}
QGPU_DEV int max(int a, int b) {
  return a > b ? a : b;
}
QGPU_DEV unsigned max(unsigned a, unsigned b) {
  return a > b ? a : b;
}
QGPU_DEV int abs(int a) {
  return a < 0 ? -a : a;
}

// --- integer vector types, laid out and aligned as CUDA's vector_types.h (clang loads and stores
// them with ld/st .v2/.v4), and their make_* functions
#define QGPU_VEC2(T, N, A)                  \
  struct __attribute__((aligned(A))) N##2 { \
    T x, y;                                 \
  };                                        \
  QGPU_DEV N##2 make_##N##2(T x, T y) {     \
    N##2 v;                                 \
    v.x = x;                                \
    v.y = y;                                \
    return v;                               \
  }
#define QGPU_VEC4(T, N, A)                        \
  struct __attribute__((aligned(A))) N##4 {       \
    T x, y, z, w;                                 \
  };                                              \
  QGPU_DEV N##4 make_##N##4(T x, T y, T z, T w) { \
    N##4 v;                                       \
    v.x = x;                                      \
    v.y = y;                                      \
    v.z = z;                                      \
    v.w = w;                                      \
    return v;                                     \
  }
QGPU_VEC2(signed char, char, 2)
QGPU_VEC2(unsigned char, uchar, 2)
QGPU_VEC2(short, short, 4)
QGPU_VEC2(unsigned short, ushort, 4)
QGPU_VEC2(int, int, 8)
QGPU_VEC2(unsigned, uint, 8)
QGPU_VEC4(signed char, char, 4)
QGPU_VEC4(unsigned char, uchar, 4)
QGPU_VEC4(short, short, 8)
QGPU_VEC4(unsigned short, ushort, 8)
QGPU_VEC4(int, int, 16)
QGPU_VEC4(unsigned, uint, 16)
#undef QGPU_VEC2
#undef QGPU_VEC4

#undef QGPU_DEV
