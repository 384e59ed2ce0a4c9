// Minimal CUDA prelude for compiling the suite's kernels with clang-16 alone
// (no CUDA toolkit headers): `clang++-16 -x cuda ... -nocudainc -include cuda_prelude.h`.
// It exists only for tools/check_compile.sh; the frontend's official prelude lives in
// plugins/frontend_ptx. It maps the CUDA device API the suite uses onto clang's NVPTX
// builtins with the same PTX semantics as CUDA's own headers.
#pragma once

#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __host__ __attribute__((host))
#define __forceinline__ __inline__ __attribute__((always_inline))

#include <__clang_cuda_builtin_vars.h>

#define __DEV static __device__ __forceinline__

// --- Atomics (generic address space, like CUDA's sm_20 atomic functions).
__DEV int atomicAdd(int* p, int v) {
  return __nvvm_atom_add_gen_i(p, v);
}
__DEV unsigned atomicAdd(unsigned* p, unsigned v) {
  return __nvvm_atom_add_gen_i((int*)p, (int)v);
}
__DEV int atomicSub(int* p, int v) {
  return __nvvm_atom_add_gen_i(p, -v);
}
__DEV unsigned atomicSub(unsigned* p, unsigned v) {
  return __nvvm_atom_add_gen_i((int*)p, -(int)v);
}
__DEV int atomicExch(int* p, int v) {
  return __nvvm_atom_xchg_gen_i(p, v);
}
__DEV unsigned atomicExch(unsigned* p, unsigned v) {
  return __nvvm_atom_xchg_gen_i((int*)p, (int)v);
}
__DEV int atomicMin(int* p, int v) {
  return __nvvm_atom_min_gen_i(p, v);
}
__DEV unsigned atomicMin(unsigned* p, unsigned v) {
  return __nvvm_atom_min_gen_ui(p, v);
}
__DEV int atomicMax(int* p, int v) {
  return __nvvm_atom_max_gen_i(p, v);
}
__DEV unsigned atomicMax(unsigned* p, unsigned v) {
  return __nvvm_atom_max_gen_ui(p, v);
}
__DEV int atomicAnd(int* p, int v) {
  return __nvvm_atom_and_gen_i(p, v);
}
__DEV unsigned atomicAnd(unsigned* p, unsigned v) {
  return __nvvm_atom_and_gen_i((int*)p, (int)v);
}
__DEV int atomicOr(int* p, int v) {
  return __nvvm_atom_or_gen_i(p, v);
}
__DEV unsigned atomicOr(unsigned* p, unsigned v) {
  return __nvvm_atom_or_gen_i((int*)p, (int)v);
}
__DEV int atomicXor(int* p, int v) {
  return __nvvm_atom_xor_gen_i(p, v);
}
__DEV unsigned atomicXor(unsigned* p, unsigned v) {
  return __nvvm_atom_xor_gen_i((int*)p, (int)v);
}
__DEV unsigned atomicInc(unsigned* p, unsigned v) {
  return __nvvm_atom_inc_gen_ui(p, v);
}
__DEV unsigned atomicDec(unsigned* p, unsigned v) {
  return __nvvm_atom_dec_gen_ui(p, v);
}
__DEV int atomicCAS(int* p, int cmp, int v) {
  return __nvvm_atom_cas_gen_i(p, cmp, v);
}
__DEV unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
  return __nvvm_atom_cas_gen_i((int*)p, (int)cmp, (int)v);
}

// --- Warp shuffles. The c operand packs the segment mask and the clamp lane as CUDA's
// headers do: ((32 - width) << 8) | (0x1f for idx/down/xor, 0 for up).
#define __QGPU_SHFL_C(width, clamp) ((((32 - (width)) << 8)) | (clamp))
__DEV int __shfl_sync(unsigned m, int v, int lane, int width = 32) {
  return __nvvm_shfl_sync_idx_i32(m, v, lane, __QGPU_SHFL_C(width, 0x1f));
}
__DEV int __shfl_up_sync(unsigned m, int v, unsigned d, int width = 32) {
  return __nvvm_shfl_sync_up_i32(m, v, d, __QGPU_SHFL_C(width, 0));
}
__DEV int __shfl_down_sync(unsigned m, int v, unsigned d, int width = 32) {
  return __nvvm_shfl_sync_down_i32(m, v, d, __QGPU_SHFL_C(width, 0x1f));
}
__DEV int __shfl_xor_sync(unsigned m, int v, int lm, int width = 32) {
  return __nvvm_shfl_sync_bfly_i32(m, v, lm, __QGPU_SHFL_C(width, 0x1f));
}

// --- Integer intrinsics.
__DEV int __popc(unsigned x) {
  return __builtin_popcount(x);
}
__DEV int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz((unsigned)x);
}
__DEV unsigned __brev(unsigned x) {
  return __builtin_bitreverse32(x);
}
__DEV int __ffs(int x) {
  return x == 0 ? 0 : __builtin_ctz((unsigned)x) + 1;
}
__DEV int __mulhi(int a, int b) {
  return (int)(((long long)a * b) >> 32);
}
__DEV unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}
__DEV int min(int a, int b) {
  return a < b ? a : b;
}
__DEV unsigned min(unsigned a, unsigned b) {
  return a < b ? a : b;
}
__DEV int max(int a, int b) {
  return a > b ? a : b;
}
__DEV unsigned max(unsigned a, unsigned b) {
  return a > b ? a : b;
}
__DEV unsigned umin(unsigned a, unsigned b) {
  return a < b ? a : b;
}
__DEV unsigned umax(unsigned a, unsigned b) {
  return a > b ? a : b;
}
__DEV int abs(int a) {
  return a < 0 ? -a : a;
}

#undef __DEV
