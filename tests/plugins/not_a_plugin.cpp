// A shared library without the qgpu entry symbol.
extern "C" __attribute__((visibility("default"))) int some_other_function(void) { return 42; }
