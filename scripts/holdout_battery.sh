#!/bin/bash
# The hold-out runs that judge how layouts nobody tuned are served (docs/untuned.md, "Where things
# stand"), each under a time limit, on a GPU host:
#
#   scripts/holdout_battery.sh DIR [PART...]
#
# Each PART writes DIR/PART/untuned.parquet (bench_untuned.py writes it after every group, so a
# part cut short keeps what it timed) and DIR/PART/log.txt. Copy a part's table to
# docs/runs/<gpu>_untuned_holdout_<name>.parquet and scripts/judge_untuned.py judges it with the rest.
# PARTs, in the default order:
#   bwd_mqa       repkv_backward at the four MQA presets, three dtypes, 14 more of the rule's picks
#   rope_bwd_mqa  the same for repkv_rope_backward
#   bwd_rest      repkv_backward at the nine GQA and MHA presets
#   bf16_probe    scripts/probes/probe_bf16_unpack.py for repkv_rope_backward
#   fwd_rest      repkv_forward at the nine GQA and MHA presets
# and, named only (not in the default order, which fits one 10-minute call):
#   OP@GROUP      OP with --refine at one layout group (mqa, rest_a, rest_b, rest_c), e.g.
#                 repkv_forward@mqa, under a 200 s limit: the raced configuration's one-parameter
#                 neighbours timed after the race (a local search's first step)
#   refine_mqa, refine_rest_a, refine_rest_b, refine_rest_c
#                 repkv_backward@mqa, @rest_a, @rest_b, @rest_c (the names of the first such runs)
set -u
dir=${1:?usage: scripts/holdout_battery.sh DIR [PART...]}
shift
parts=("$@")
((${#parts[@]})) || parts=(bwd_mqa rope_bwd_mqa bwd_rest bf16_probe fwd_rest)
export PYTHONUNBUFFERED=1
mqa=starcoder,santacoder,gemma-2b,falcon-7b
rest_a=phi-3-mini,gemma-7b,llama2-7b,gpt2-124m
rest_b=phi-3-medium,qwen2.5-14b,yi-34b
rest_c=mistral-large-2,falcon-180b
rest=$rest_a,$rest_b,$rest_c
untuned=(python3 scripts/bench_untuned.py --gpu h200 --hold-out --dtype fp32,bf16,fp16)
for part in "${parts[@]}"; do
  out=$dir/$part
  mkdir -p "$out"
  echo "=== $part $(date -u +%T)"
  step=$part
  [[ $part == refine_* ]] && step=repkv_backward@${part#refine_}
  case $step in
    bwd_mqa) timeout 140 "${untuned[@]}" --op repkv_backward --layouts $mqa --explore 14 --out "$out" ;;
    rope_bwd_mqa) timeout 130 "${untuned[@]}" --op repkv_rope_backward --layouts $mqa --explore 14 --out "$out" ;;
    bwd_rest) timeout 150 "${untuned[@]}" --op repkv_backward --layouts $rest --out "$out" ;;
    bf16_probe) timeout 50 python3 scripts/probes/probe_bf16_unpack.py --op repkv_rope_backward --out "$out" ;;
    fwd_rest) timeout 120 "${untuned[@]}" --op repkv_forward --layouts $rest --out "$out" ;;
    *@mqa|*@rest_a|*@rest_b|*@rest_c)
      group=${step#*@}
      timeout 200 "${untuned[@]}" --op "${step%@*}" --layouts "${!group}" --refine --out "$out" ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac > >(tee "$out/log.txt") 2>&1
  echo "exit $?" >> "$out/log.txt"
done
