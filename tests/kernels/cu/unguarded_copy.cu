// No bounds guard: launched with more threads than elements it reads and writes out of bounds,
// which the host must report instead of computing silently.
extern "C" __global__ void unguarded_copy(const int* in, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] + 1;
}
