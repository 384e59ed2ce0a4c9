// Circuit unit "control" (under construction).
