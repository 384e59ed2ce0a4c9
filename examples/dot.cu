// Dot product of two int32 vectors: each thread multiplies its pair and adds it
// to *out with an atomic, the way a CUDA programmer writes a small reduction.
//   qgpu-host --config configs/simt_qwen2b.yaml run examples/dot.cu \
//     --grid 1 --block 4 --arg a=[1,2,3] --arg b=[4,5,6] --arg out=[0] --arg n=3
extern "C" __global__ void dot(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, a[i] * b[i]);
}
