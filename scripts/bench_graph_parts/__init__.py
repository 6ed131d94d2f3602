"""The pieces of scripts/bench_graph.py, what one call costs inside a CUDA graph (the script
itself keeps its command line and its loop over shapes and dtypes):

- selection: which shapes by default, and which of the store's configurations join as sides;
- arithmetic: the measures from replay times and event windows (no GPU);
- gpu: what the run opens on the GPU once (the store's index, the flushes, the graph timer);
- sides: a pair's sides (the tuned kernel and its peers), each validated;
- graphs: CUDA graphs of the calls and their replay times (graph_cold, graph_warm, graph_fed);
- held: the peers benchmark's event windows (held, held_long);
- rows: a pair's rows of graph.parquet and its printed lines.

The GPU pieces (gpu, sides, graphs, held) import CuPy and PyTorch: bench_graph.main imports
them once it has checked its input and set REPKV_L2.
"""
