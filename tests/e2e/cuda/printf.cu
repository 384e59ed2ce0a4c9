// Device printf (a vprintf call in PTX): refused at the call.
__global__ void k(int* a) {
  printf("a[0] = %d\n", a[0]);
  a[0] = 1;
}
