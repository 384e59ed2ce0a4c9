// Tests of the circuit unit "control" (under construction).
#include <gtest/gtest.h>
