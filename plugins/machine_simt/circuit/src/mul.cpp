// Circuit unit "mul" (under construction).
