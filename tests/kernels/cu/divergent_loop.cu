// Loop with a lane-dependent trip count: lanes leave the loop at different times.
extern "C" __global__ void divergent_loop(const int* count, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int acc = 0;
    for (int k = 0; k < count[i]; ++k) acc += k * k + i;
    out[i] = acc;
  }
}
