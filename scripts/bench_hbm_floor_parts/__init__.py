"""The pieces of scripts/bench_hbm_floor.py, the HBM's floor for an op's traffic (the script
keeps its command line, its traffic model and its loop over shapes and dtypes):

- stream: the streaming kernels (read, write, copy, twin), the twin's index math and their
  buffers and launches (CuPy imported only when they are built);
- table: the summary over the memcpy and its markdown table (no GPU).
"""
