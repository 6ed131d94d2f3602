"""Everything in the packages that touches the device. `session`, `kernels`, `timing`, `peers`
and `api` import cupy; `torch_op` imports it only on a CUDA call, and `runner` and `worker`
only inside the worker process, so the tuner's own process never does. The peers of the
benchmark, `torch_peers` (PyTorch) and `triton_peer` (Triton), import no cupy: their tests run
on the CPU. No other package (variants, results, service, the rest of tuner) imports cupy;
outside the packages, `scripts/bench_kernels.py` and the tests (`tests/conftest.py` to look
for a device, the `gpu` tests) import it inside functions."""
