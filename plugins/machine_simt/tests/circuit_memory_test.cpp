// Tests of the circuit unit "memory" (under construction).
#include <gtest/gtest.h>
