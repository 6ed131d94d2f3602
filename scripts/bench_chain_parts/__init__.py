"""The pieces of scripts/bench_chain.py, the GQA chain benchmark (the script keeps its command
line and entry point):

- plan: the op pairs, shapes, peers' names and the plan, counted for --estimate (no GPU);
- llmc: llm.c's RoPE kernels (results/llmc_rope.cuh, shared with the header harness), their
  names and launch geometry (no GPU);
- torch_chain: llm.c's chains written in PyTorch, the torch.compile peer (torch);
- choices: the store's configurations for each op (results.selection);
- report: rows, ratios, the targets and the markdown (pandas);
- gpu_peers: how the GPU half builds and checks each peer (cupy, torch);
- gpu: the GPU half's loop: the sweep of llm.c's blocks, the peers, the interleaved rounds.
"""
