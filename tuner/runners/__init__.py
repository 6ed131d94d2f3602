"""What measures a trial: the runner contract, the GPU runner and its worker process (`gpu/`),
a replay of recorded rows, races and their timing."""
