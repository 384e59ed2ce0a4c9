// Memory faults (docs/ISA.md §2): each kernel faults in some lanes; the interpreter, the circuit and
// the merged model stop at the same access with the same one-line error (docs/PROTOCOL.md §3.3).

// A load at a + k bytes: misaligned unless k is a multiple of 4.
extern "C" __global__ void misaligned_load(int* a, int* out, int k) {
  const int* p = (const int*)((const char*)a + k);
  out[threadIdx.x] = p[threadIdx.x];
}

// a[i + n] = i: past the end of a (the last array) for i ≥ 4 − n: lane 4 − n faults first.
extern "C" __global__ void store_past_end(int* a, int n) {
  a[threadIdx.x + n] = threadIdx.x;
}

// A shared array of 8 words read at i + tid after a barrier: past its end for i + tid ≥ 8.
extern "C" __global__ void shared_past_end(int* out, int i) {
  __shared__ int s[8];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = s[i + threadIdx.x];
}

// An atomic at a word address computed in the same block: the faulting lane's address is an earlier
// slot's result, not a register row.
extern "C" __global__ void atomic_far(int* a, int stride) {
  atomicAdd(&a[threadIdx.x * stride], 1);
}

// a[blockIdx.x * 4 + tid]: thread block 1 is past the end of a 4-word a (after block 0 ran).
extern "C" __global__ void block_past_end(int* a) {
  a[blockIdx.x * 4 + threadIdx.x] = 1;
}
