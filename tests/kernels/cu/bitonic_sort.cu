// Bitonic sort of 64 keys per block in shared memory: 32 threads, each owning one compare-exchange
// of every stage (the pair i, i + j with i = 2t - t mod j), ascending; every block sorts its own
// 64-key segment of keys in place.
#define KEYS 64

extern "C" __global__ void bitonic_sort(int* keys) {
  __shared__ int s[KEYS];
  const int t = threadIdx.x;
  int* seg = keys + blockIdx.x * KEYS;
  s[t] = seg[t];
  s[t + KEYS / 2] = seg[t + KEYS / 2];
  __syncthreads();
  for (int k = 2; k <= KEYS; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      const int i = 2 * t - (t & (j - 1));
      const int a = s[i], b = s[i + j];
      const bool ascending = (i & k) == 0;
      if ((a > b) == ascending) {
        s[i] = b;
        s[i + j] = a;
      }
      __syncthreads();
    }
  }
  seg[t] = s[t];
  seg[t + KEYS / 2] = s[t + KEYS / 2];
}
