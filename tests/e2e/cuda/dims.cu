// 2-D and 3-D launches (docs/ISA.md §2): every index and extent of CUDA's dim3 as the machine
// derives them from its linear thread and block numbers, x fastest.

// out[(linear block) * (threads per block) + linear thread] = the thread's six indices packed in
// decimal digits (tid.x, tid.y, tid.z, ctaid.x, ctaid.y, ctaid.z); sizes[0..5] = the six extents.
extern "C" __global__ void indices(int* out, int* sizes) {
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] =
      threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z + 1000 * blockIdx.x + 10000 * blockIdx.y +
      100000 * blockIdx.z;
  if (block == 0 && thread == 0) {
    sizes[0] = blockDim.x;
    sizes[1] = blockDim.y;
    sizes[2] = blockDim.z;
    sizes[3] = gridDim.x;
    sizes[4] = gridDim.y;
    sizes[5] = gridDim.z;
  }
}

// The classic 2-D transpose: out (cols x rows) = in (rows x cols), row-major, one thread per element
// of a grid of 2-D blocks that covers the matrix (threads outside it do nothing).
extern "C" __global__ void transpose(const int* in, int* out, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}
