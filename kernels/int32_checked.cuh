// Overflow-checked int32 arithmetic shared by the kernels of this library.
//
// The machine has 32-bit words only, and its lowering keeps an i64 value's high word only where a
// constant right shift observes it (docs/ISA.md §7), so these helpers stay in 32-bit operations:
// sign tests for add and sub, __mulhi for products, and an exact wide sum for reductions.
#pragma once

// a + b (wrapped), setting *ov to 1 when the exact sum is outside int32.
__device__ inline int add_checked(int a, int b, int* ov) {
  int r = (int)((unsigned)a + (unsigned)b);
  *ov |= ((a ^ r) & (b ^ r)) < 0;  // both operands' sign differs from the result's
  return r;
}

// a - b (wrapped), setting *ov to 1 when the exact difference is outside int32.
__device__ inline int sub_checked(int a, int b, int* ov) {
  int r = (int)((unsigned)a - (unsigned)b);
  *ov |= ((a ^ b) & (a ^ r)) < 0;  // operands of different signs and the result took b's sign
  return r;
}

// a * b (wrapped), setting *ov to 1 when the exact product is outside int32: the high word of
// the 64-bit product must be the low word's sign extension.
__device__ inline int mul_checked(int a, int b, int* ov) {
  int lo = a * b;
  *ov |= __mulhi(a, b) != (lo >> 31);
  return lo;
}

// An exact sum of int32 terms: value = lo + hi * 2^32, lo read as int32. The total fits in int32
// exactly when hi == 0, whatever the order of the terms, so a partial sum may leave int32 and come
// back. Each term moves hi by at most 1, so hi stays small; a product outside int32 (a term the sum
// cannot hold) adds kWidePoison to hi instead, which no later term can cancel for sums of at most
// 127 terms (the machine's memory holds 126 words): hi != 0 then reports the overflow.
struct WideSum {
  int lo;
  int hi;
};

#define kWidePoison (1 << 24)

__device__ inline WideSum wide_zero() {
  WideSum w = {0, 0};
  return w;
}

// w += v. A wrap of lo carries +1 (v >= 0) or -1 (v < 0) into hi.
__device__ inline void wide_add(WideSum* w, int v) {
  int r = (int)((unsigned)w->lo + (unsigned)v);
  int wrapped = ((w->lo ^ r) & (v ^ r)) >> 31;  // -1 on a wrap, else 0
  w->hi += wrapped & ((v >> 31) | 1);
  w->lo = r;
}

// w += a * b.
__device__ inline void wide_add_product(WideSum* w, int a, int b) {
  int ov = 0;
  int p = mul_checked(a, b, &ov);
  w->hi += ov << 24;  // kWidePoison
  wide_add(w, p);
}

// w += o.
__device__ inline void wide_merge(WideSum* w, WideSum o) {
  w->hi += o.hi;
  wide_add(w, o.lo);
}

// 1 when the sum is outside int32.
__device__ inline int wide_overflow(WideSum w) {
  return w.hi != 0;
}

// The whole block's sum of every thread's w, stored by thread 0: *out = the total (meaningless on
// overflow) and *overflow = 1 when it is outside int32, else 0. part_lo and part_hi are the
// kernel's __shared__ arrays of blockDim.x words each (a __shared__ variable inside a device
// function becomes a .weak symbol the frontend does not read).
__device__ inline void wide_block_store(WideSum w, int* part_lo, int* part_hi, int* out, int* overflow) {
  int t = threadIdx.x;
  part_lo[t] = w.lo;
  part_hi[t] = w.hi;
  __syncthreads();
  if (t == 0) {
    WideSum total = wide_zero();
#pragma unroll 1
    for (int k = 0; k < (int)blockDim.x; ++k) {
      WideSum p = {part_lo[k], part_hi[k]};
      wide_merge(&total, p);
    }
    out[0] = total.lo;
    overflow[0] = wide_overflow(total);
  }
}
