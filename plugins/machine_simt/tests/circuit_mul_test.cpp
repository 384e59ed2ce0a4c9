// Tests of the circuit unit "mul" (under construction).
#include <gtest/gtest.h>
