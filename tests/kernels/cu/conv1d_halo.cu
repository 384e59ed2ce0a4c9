// 1-D convolution with a 7-tap integer filter: out[i] = sum_k w[k] * in[i + k - 3], zero outside
// [0, n). Each block of 32 threads stages its 32 inputs plus a 3-element halo on each side in shared
// memory (the filter too), so every input is read from global memory once per block.
#define RADIUS 3
#define TAPS (2 * RADIUS + 1)
#define BLOCK 32

extern "C" __global__ void conv1d_halo(const int* in, const int* w, int* out, int n) {
  __shared__ int s[BLOCK + 2 * RADIUS];
  __shared__ int ws[TAPS];
  const int t = threadIdx.x;
  const int i = blockIdx.x * BLOCK + t;
  if (t < TAPS) ws[t] = w[t];
  s[t + RADIUS] = i < n ? in[i] : 0;
  if (t < RADIUS) {
    const int left = i - RADIUS, right = i + BLOCK;
    s[t] = left >= 0 && left < n ? in[left] : 0;
    s[t + BLOCK + RADIUS] = right < n ? in[right] : 0;
  }
  __syncthreads();
  if (i >= n) return;
  int acc = 0;
  for (int k = 0; k < TAPS; ++k) acc += ws[k] * s[t + k];
  out[i] = acc;
}
