// Several scalar parameters, including negative and large ones.
extern "C" __global__ void affine_scalars(int* out, int n, int a, int b, int c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (a * i + b) * i + c;
}
