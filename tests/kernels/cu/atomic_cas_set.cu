// atomicCAS as a set insert: slot[k] goes from -1 to k once; count the inserts that won.
extern "C" __global__ void atomic_cas_set(const int* key, int n, int* slot, int* inserted) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int k = key[i];
    if (atomicCAS(&slot[k], -1, k) == -1) atomicAdd(inserted, 1);
  }
}
