// CUDA warp idioms at the default width (32) on 32-thread blocks: the machine's 4-lane warps
// exchange through shared-memory scratch and block barriers (docs/ISA.md §8). The expected outputs
// are computed independently in tests/CMakeLists.txt (closed forms over the inputs in[i] = i).
#define FULL 0xffffffffu

// Sum of each block's 32 inputs in out[blockIdx.x]: the standard down-reduction.
extern "C" __global__ void warp_sum(const int* in, int* out) {
  int v = in[blockIdx.x * 32 + threadIdx.x];
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(FULL, v, o);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// Inclusive prefix sum within each block (Hillis-Steele with __shfl_up_sync).
extern "C" __global__ void warp_scan(const int* in, int* out) {
  const int i = blockIdx.x * 32 + threadIdx.x, lane = threadIdx.x % 32;
  int v = in[i];
  for (int o = 1; o < 32; o *= 2) {
    const int n = __shfl_up_sync(FULL, v, o);
    if (lane >= o) v += n;
  }
  out[i] = v;
}

// Butterfly all-reduce: every thread gets its block's sum.
extern "C" __global__ void warp_allreduce(const int* in, int* out) {
  const int i = blockIdx.x * 32 + threadIdx.x;
  int v = in[i];
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(FULL, v, m);
  out[i] = v;
}

// Stream compaction: the inputs divisible by 3, in order, at the front of each block's part of out;
// count[b] = how many.
extern "C" __global__ void warp_compact(const int* in, int* out, int* count) {
  const int i = blockIdx.x * 32 + threadIdx.x, lane = threadIdx.x % 32;
  const int x = in[i];
  const bool keep = x % 3 == 0;
  const unsigned ballot = __ballot_sync(FULL, keep);
  if (keep) out[blockIdx.x * 32 + __popc(ballot & ((1u << lane) - 1))] = x;
  if (lane == 0) count[blockIdx.x] = __popc(ballot);
}

// out[i] = any(x > t) + 2 * all(x > u), the same in every thread of a block.
extern "C" __global__ void warp_any_all(const int* in, int* out, int t, int u) {
  const int i = blockIdx.x * 32 + threadIdx.x;
  const int x = in[i];
  out[i] = __any_sync(FULL, x > t) + 2 * __all_sync(FULL, x > u);
}

// Warp-synchronous tree reduction through shared memory, written correctly with __syncwarp.
extern "C" __global__ void syncwarp_sum(const int* in, int* out) {
  __shared__ int s[32];
  const int tid = threadIdx.x;
  int v = in[blockIdx.x * 32 + tid];
  s[tid] = v;
  __syncwarp();
  for (int o = 16; o > 0; o /= 2) {
    if (tid < o) v += s[tid + o];
    __syncwarp();
    s[tid] = v;
    __syncwarp();
  }
  if (tid == 0) out[blockIdx.x] = v;
}

// Refused: a member mask naming half of the warp.
extern "C" __global__ void half_mask(int* a) {
  a[threadIdx.x] = __shfl_down_sync(0xffffu, a[threadIdx.x], 1);
}

// Refused: a shuffle that only the threads with a positive input reach.
extern "C" __global__ void divergent_shfl(int* a) {
  int v = a[threadIdx.x];
  if (v > 0) a[threadIdx.x] = __shfl_down_sync(FULL, v, 16);
}

// The threads of the warp, in converged code: all threads of the block.
extern "C" __global__ void warp_activemask(unsigned* out) {
  out[threadIdx.x] = __activemask();
}
