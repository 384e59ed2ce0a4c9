// Data-dependent while loop: Collatz steps to reach 1, capped.
extern "C" __global__ void collatz(const int* start, int* steps, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned v = (unsigned)start[i];
    int s = 0;
    while (v != 1u && s < 200) {
      v = (v & 1u) ? 3u * v + 1u : v >> 1;
      ++s;
    }
    steps[i] = s;
  }
}
