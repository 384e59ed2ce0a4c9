// Every thread adds 1 to one of four counters chosen by its block: 8 blocks of 32 threads
// give [64, 64, 64, 64] (tests/CMakeLists.txt, the large config beyond the default 128 threads).
extern "C" __global__ void count(int* out) {
  atomicAdd(&out[blockIdx.x & 3], 1);
}
