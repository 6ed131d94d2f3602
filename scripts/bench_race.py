"""Does the op's first-call race tell apart two configurations a few per cent apart? On a GPU:

  1. pick pairs from the bundled store (`race_pairs`): per group, its served configuration and
     the fastest of another family that ran 1.5-4% behind it there (bf16, repkv_backward);
  2. time both at length in one process, interleaved (REFERENCE_ROUNDS rounds of the race's
     own timing, `repkv_tune.race_bench.RaceBench`): the truth, and the gap between them;
  3. run the op's race (`tuner.runners.race.run_race` with the op's rounds, repetitions and
     margin) RACES times with the slower one served first and RACES times with the faster one
     first, and count how often it keeps the faster.

A race keeps the served candidate unless another is more than RACE_MARGIN (1%) faster, so with
the faster one served first every decision should keep it; with the slower one first, it must
see the gap through its noise.

    python scripts/bench_race.py --out DIR        # race_power.parquet, the table printed
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from results.index import StoreIndex, build_index  # noqa: E402
from results.store import bundled_results_dir, load_results  # noqa: E402
from variants import Config, DType, Shape, get_dtype, get_op  # noqa: E402

RACES = 20  # races in each order
REFERENCE_ROUNDS = 30  # interleaved rounds of the long timing that decides the truth
GAP = (1.015, 1.04)  # the stored slow-down of the other configuration


@dataclass(frozen=True)
class Pair:
    shape: Shape
    dtype: DType
    served: Config
    other: Config
    stored_gap: float


def race_pairs(index: StoreIndex, gpu: str, dtype: DType, count: int = 8) -> list[Pair]:
    """Per group of `dtype` on `gpu` (smallest first): the served configuration and the fastest
    configuration of another family within GAP of it, up to `count` pairs over distinct sizes."""
    pairs: list[Pair] = []
    groups = sorted(
        (g for g in index.groups_of(gpu) if g.dtype.name == dtype.name),
        key=lambda g: g.shape.bytes_moved(dtype),
    )
    for group in groups:
        best = group.candidates[0]
        other = next((c for c in group.candidates if c.family.name != best.family.name), None)
        if other is None:
            continue
        gap = other.time_ms / best.time_ms
        if GAP[0] <= gap <= GAP[1]:
            pairs.append(Pair(group.shape, dtype, best.config, other.config, gap))
    if len(pairs) <= count:
        return pairs
    step = len(pairs) / count  # spread over the sizes
    return [pairs[int(i * step)] for i in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "runs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dtype = get_dtype(args.dtype)
    index = build_index(load_results(bundled_results_dir())[0]).for_op("repkv_backward")
    pairs = race_pairs(index, args.gpu, dtype, args.pairs)

    import torch

    from repkv_tune import race as op_race
    from repkv_tune.launcher import compile_launcher
    from repkv_tune.race_bench import RaceBench
    from tuner.runners.race import RACE_MARGIN, run_race

    rows = []
    stream = torch.cuda.Stream(0)
    with torch.cuda.stream(stream):
        for pair in pairs:
            bench = RaceBench(get_op(), pair.shape, dtype, 0, stream)
            served = compile_launcher(pair.shape, dtype, pair.served, 0, "bench")
            other = compile_launcher(pair.shape, dtype, pair.other, 0, "bench")
            long: dict[str, list[float]] = {served.config_key: [], other.config_key: []}
            for round_ in range(REFERENCE_ROUNDS):
                for launcher in (served, other) if round_ % 2 == 0 else (other, served):
                    long[launcher.config_key].extend(bench.time(launcher))
            medians = {key: statistics.median(samples) for key, samples in long.items()}
            fast, slow = sorted((served, other), key=lambda lch: medians[lch.config_key])
            gap = medians[slow.config_key] / medians[fast.config_key]
            right = {}
            for name, order in (("slower_first", [slow, fast]), ("faster_first", [fast, slow])):
                kept = [
                    run_race(order, bench.time, margin=RACE_MARGIN, rounds=op_race.RACE_ROUNDS).winner
                    for _ in range(RACES)
                ]
                right[name] = sum(winner is fast for winner in kept)
            row = {
                **pair.shape.as_dict(),
                "dtype": dtype.name,
                "MB": pair.shape.bytes_moved(dtype) / 1e6,
                "faster": fast.config_key,
                "slower": slow.config_key,
                "stored_gap": pair.stored_gap,
                "measured_gap": gap,
                "fast_ms": medians[fast.config_key],
                "races": RACES,
                "right_slower_first": right["slower_first"],
                "right_faster_first": right["faster_first"],
            }
            rows.append(row)
            print(
                f"{pair.shape.key} {dtype.name} ({row['MB']:.0f} MB): {fast.config_key} "
                f"{gap:.3f}x faster than {slow.config_key} over {REFERENCE_ROUNDS} rounds; the race "
                f"kept the faster {right['slower_first']}/{RACES} with the slower served first, "
                f"{right['faster_first']}/{RACES} with the faster first",
                flush=True,
            )
            torch.cuda.empty_cache()
    table = pd.DataFrame(rows)
    table.to_parquet(args.out / "race_power.parquet", index=False)
    print("| shape | MB | measured gap | kept the faster, slower served first | faster served first |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['B']},{r['T']},{r['NH']},{r['NH_KV']},{r['HD']} | {r['MB']:.0f} | {r['measured_gap']:.3f} "
            f"| {r['right_slower_first']}/{r['races']} | {r['right_faster_first']}/{r['races']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
