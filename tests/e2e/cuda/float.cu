// Floating point is refused at the CUDA line; with keep_ptx the message also names the kept PTX.
__global__ void scale(float* p) {
  int i = threadIdx.x;
  p[i] = p[i] * 2.5f;
}
