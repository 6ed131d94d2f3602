"""Everything in the packages that touches the device. `session`, `kernels`, `timing`, `peers`
and `api` import cupy; `torch_op` imports it only on a CUDA call, `runner` and `worker` only
inside the worker process (so the tuner's own process never does), and `torch_peers` and
`triton_peer` (torch and triton) never. No other package (variants, results, service, the
rest of tuner) imports cupy; outside the packages, `scripts/bench_kernels.py` and the tests
(`tests/conftest.py` to look for a device, the `gpu` tests) import it inside functions."""
