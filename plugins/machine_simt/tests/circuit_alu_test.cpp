// Tests of the circuit unit "alu" (under construction).
#include <gtest/gtest.h>
