// REJECTED: floating point; the machine computes on int32 only.
extern "C" __global__ void half_scale(const int* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (int)((float)x[i] * 0.5f + 0.25f);
}
