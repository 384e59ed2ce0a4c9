// Races the interpreter's --racecheck reports (docs/ISA.md §2), and their race-free forms.

// The classic unrolled last-warp reduction over volatile shared memory, relying on a 32-thread warp
// running in lockstep. Since Volta a warp's threads need not: without __syncwarp() this is a race,
// and on this machine (warps of 4 lanes) it returns 78 for the inputs 1..16 where a GPU gives 136.
extern "C" __global__ void warp_synchronous_sum(const int* in, int* out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = in[t];
  s[t + 32] = 0;
  __syncthreads();
  if (t < 32) {
    volatile int* v = s;
    v[t] += v[t + 16];
    v[t] += v[t + 8];
    v[t] += v[t + 4];
    v[t] += v[t + 2];
    v[t] += v[t + 1];
  }
  if (t == 0) out[0] = s[0];
}

// The same reduction written for independent thread scheduling: each step reads, then waits for
// the warp before it writes, and again before the next read.
extern "C" __global__ void syncwarp_sum(const int* in, int* out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = in[t];
  s[t + 32] = 0;
  __syncthreads();
  int v = s[t];
  for (int o = 16; o > 0; o /= 2) {
    v += s[t + o];
    __syncwarp();
    s[t] = v;
    __syncwarp();
  }
  if (t == 0) out[0] = s[0];
}

// Every thread block writes its own index to the same word: which one stays is unspecified.
extern "C" __global__ void last_block_wins(int* out) {
  if (threadIdx.x == 0) out[0] = blockIdx.x;
}
