// Circuit unit "alu" (under construction).
