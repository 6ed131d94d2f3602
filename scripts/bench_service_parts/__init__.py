"""The pieces of scripts/bench_service.py, the results service's benchmark (the script itself
keeps its command line, the synthetic store, the server's start and the leave-one-out
evaluation):

- load: the GET /best clients (closed and open loop) and the line each scenario prints;
- exports: GET /best while export clients loop on a large export (--mode exports).
"""
