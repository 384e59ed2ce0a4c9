// Search loop with continue and break: index of the first element equal to key, or -1.
extern "C" __global__ void linear_search(const int* data, int len, const int* keys, int* found, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int key = keys[i];
    int pos = -1;
    for (int j = 0; j < len; ++j) {
      if (data[j] != key) continue;
      pos = j;
      break;
    }
    found[i] = pos;
  }
}
