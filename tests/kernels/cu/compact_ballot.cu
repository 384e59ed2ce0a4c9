// Stream compaction with warp votes: each block of 32 threads (one CUDA warp) owns `chunk`
// consecutive inputs and copies those above `threshold`, in order, to the same place in out; the
// ballot of the survivors gives each its slot (__popc of the lower lanes' bits) and the running
// count (__popc of all). count[b] = how many block b kept.
#define FULL_MASK 0xffffffffu

extern "C" __global__ void compact_ballot(const int* in, int n, int chunk, int threshold, int* out, int* count) {
  const int lane = threadIdx.x % 32;
  const int start = blockIdx.x * chunk;
  const int end = min(n, start + chunk);
  int kept = 0;
  for (int base = start; base < end; base += 32) {
    const int i = base + lane;
    const int x = i < end ? in[i] : 0;
    const bool keep = i < end && x > threshold;
    const unsigned votes = __ballot_sync(FULL_MASK, keep);
    if (keep) out[start + kept + __popc(votes & ((1u << lane) - 1u))] = x;
    kept += __popc(votes);
  }
  if (lane == 0) count[blockIdx.x] = kept;
}
