// Four arrays: out[i] = cond[i] ? a[i] : b[i].
extern "C" __global__ void select_arrays(const int* cond, const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = cond[i] ? a[i] : b[i];
}
