// out[n - 1 - i] = in[i]: lane-dependent store addresses.
extern "C" __global__ void reverse_copy(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[n - 1 - i] = in[i];
}
