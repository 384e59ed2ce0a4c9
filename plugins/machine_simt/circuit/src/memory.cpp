// Circuit unit "memory" (under construction).
