// LSD radix sort of 128 unsigned keys per block of 32 threads (one CUDA warp), one bit per pass
// over the low `bits` bits, in shared memory (two buffers, each pass reading one and writing the
// other). Each pass is a stable split: every thread counts the zeros among its 4 consecutive keys,
// a block-wide exclusive scan of the counts (a warp scan with __shfl_up_sync, the total broadcast
// with __shfl_sync) gives the place of its keys with a 0 bit, and those with a 1 bit follow all the
// zeros. Every block sorts its own 128-key segment in place.
#define THREADS 32
#define ITEMS 4
#define KEYS (THREADS * ITEMS)
#define FULL_MASK 0xffffffffu

extern "C" __global__ void radix_sort(unsigned* keys, int bits) {
  __shared__ unsigned buf[2][KEYS];
  const int t = threadIdx.x;
  unsigned* seg = keys + blockIdx.x * KEYS;
  for (int k = 0; k < ITEMS; ++k) buf[0][k * THREADS + t] = seg[k * THREADS + t];
  __syncthreads();
  for (int bit = 0; bit < bits; ++bit) {
    const unsigned* src = buf[bit & 1];
    unsigned* dst = buf[(bit & 1) ^ 1];
    int zeros = 0;
    for (int k = 0; k < ITEMS; ++k) zeros += ((src[t * ITEMS + k] >> bit) & 1u) == 0;
    int incl = zeros;
    for (int d = 1; d < THREADS; d <<= 1) {
      const int y = __shfl_up_sync(FULL_MASK, incl, d);
      if (t >= d) incl += y;
    }
    const int total_zeros = __shfl_sync(FULL_MASK, incl, THREADS - 1);
    int zero_pos = incl - zeros;                       // zeros of the threads before this one
    int one_pos = total_zeros + t * ITEMS - zero_pos;  // after every zero: the ones before this thread's
    for (int k = 0; k < ITEMS; ++k) {
      const unsigned v = src[t * ITEMS + k];
      if ((v >> bit) & 1u)
        dst[one_pos++] = v;
      else
        dst[zero_pos++] = v;
    }
    __syncthreads();  // dst is complete; the next pass writes into this pass's src
  }
  for (int k = 0; k < ITEMS; ++k) seg[k * THREADS + t] = buf[bits & 1][k * THREADS + t];
}
