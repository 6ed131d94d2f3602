"""The pieces of scripts/bench_kernels.py, the peers benchmark (the script itself keeps its
command line, its plan and its entry point):

- device: what the bench uses of the device (`Device`; `gpu_device` on a GPU, CPU fakes in
  the tests) and which failures end the run (`recoverable`);
- loop: the measuring loop, `PeerBench`: rows, the parquet, the first pass and the run;
- peer_measures: how each peer is built, validated and timed (copy, empty launch, this
  project's kernels, PyTorch, Triton);
- later_passes: the passes after the first (max-autotune, head to head, device time);
- preparation: what the run reads and compiles before it measures (the tuned choices, the
  CUDA kernels);
- report: what the run prints at its end.
"""
