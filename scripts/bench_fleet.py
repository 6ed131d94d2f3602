"""Fleet throughput on one host: one shape tuned by one worker, then by a worker per GPU.

On a host with two GPUs (the default `--devices 0,1`):

    python scripts/bench_fleet.py        # B=8,T=1024,NH=32,NH_KV=8,HD=128 bf16, TPE, 120 configurations

1. compiles every valid kernel of the shape into CuPy's disk cache first (both runs then
   start warm: a cold cache would flatter whichever run comes second);
2. tunes the shape with one worker (`python -m tuner --device 0`), then with
   `python -m tuner --devices 0,1`, each on a fresh results directory and a fresh study
   (journal file), the same budget (`--trials`), the bundled results left out (they would
   answer instead of measuring);
3. reads the rows each run wrote and reports, per run, the configurations measured, the
   configurations per second (while every worker measures: from the last worker's first row
   to the first worker's last row, so that one worker starting a second later does not count
   against the fleet; first row to last row; end to end: the command's wall time, start-up
   included), the winner, and how many rows each configuration has.

The verdict: the ratio of the rates while every worker measures (target >= 1.8x), the
winners the same within noise (2% of the copy time, or the same configuration), and no
configuration measured twice. Exit status 1 if a configuration was measured twice (or, with --check, if a
target is missed). Expected to take one to two minutes on two H200s.

Output: the tables printed, and with `--json FILE` the numbers as JSON; the throughput table of
docs/fleet.md comes from its run on two H200s, `docs/runs/h200x2_fleet.log` and `.json`.

`--replay DIR --replay-delay S` runs the same steps against a recording (no GPU, no
compile): how the tests check this script.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from results.store import load_results  # noqa: E402

SHAPE = "B=8,T=1024,NH=32,NH_KV=8,HD=128"
TARGET_RATIO = 1.8
NOISE = 0.02


@dataclass
class RunStats:
    workers: int
    rows: int
    distinct: int
    most_rows_per_config: int
    measuring_s: float  # first row to last row
    wall_s: float  # the tuning command, start-up included
    per_s: float  # configurations per second, first row to last
    per_s_wall: float
    steady_per_s: float  # configurations per second while every worker measures
    winner: str
    winner_ratio: float  # time over the same-run copy

    @property
    def twice(self) -> bool:
        return self.most_rows_per_config > 1


@dataclass
class Verdict:
    ratio: float  # while every worker measures, fleet over one worker: the target's measure
    ratio_span: float  # first row to last row
    ratio_wall: float
    same_winner: bool  # same configuration, or within NOISE of the copy time
    winner_gap: float
    measured_twice: bool
    meets_target: bool


def tuner_argv(
    *,
    shape: str,
    dtype: str,
    trials: int,
    results: Path,
    study: str,
    seed: int,
    devices: str | None,
    replay: Path | None = None,
    replay_delay: float = 0.0,
) -> list[str]:
    """The `python -m tuner` command line of one run."""
    argv = ["-m", "tuner", "--shape", shape, "--dtype", dtype, "--trials", str(trials), "--sampler", "tpe"]
    argv += [
        "--results",
        str(results),
        "--study",
        study,
        "--seed",
        str(seed),
        "--no-progress",
        "--no-bundled",
    ]
    argv += ["--devices", devices] if devices else ["--device", "0"]
    if replay is not None:
        argv += ["--replay", str(replay), "--replay-delay", str(replay_delay)]
    return argv


def stats(frame: pd.DataFrame, workers: int, wall_s: float) -> RunStats:
    """What one run's rows say."""
    if frame.empty:
        return RunStats(workers, 0, 0, 0, 0.0, wall_s, 0.0, 0.0, 0.0, "-", math.inf)
    stamps = pd.to_datetime(frame["timestamp"], utc=True)
    span = (stamps.max() - stamps.min()).total_seconds()
    # the window in which every worker measures: after the last one's first row, before the
    # first one's last row (start-up and the budget's end are not spread evenly over workers)
    by_run = stamps.groupby(frame["run_id"].to_numpy())
    start, end = by_run.min().max(), by_run.max().min()
    window = (end - start).total_seconds()
    inside = int(((stamps >= start) & (stamps <= end)).sum())
    steady = (inside - 1) / window if window >= 1.0 and inside >= 10 else math.nan
    per_key = frame["config_key"].value_counts()
    ok = frame[frame["status"] == "ok"].sort_values("ratio_to_copy")
    winner = ok.iloc[0] if not ok.empty else None
    rows = len(frame)
    return RunStats(
        workers=workers,
        rows=rows,
        distinct=int(frame["config_key"].nunique()),
        most_rows_per_config=int(per_key.max()),
        measuring_s=span,
        wall_s=wall_s,
        per_s=(rows - 1) / span if span > 0 else math.inf,
        per_s_wall=rows / wall_s if wall_s > 0 else math.inf,
        steady_per_s=steady if math.isfinite(steady) else ((rows - 1) / span if span > 0 else math.inf),
        winner=str(winner["config_key"]) if winner is not None else "-",
        winner_ratio=float(winner["ratio_to_copy"]) if winner is not None else math.inf,
    )


def verdict(one: RunStats, fleet: RunStats, target: float = TARGET_RATIO, noise: float = NOISE) -> Verdict:
    ratio = fleet.steady_per_s / one.steady_per_s if one.steady_per_s > 0 else math.nan
    ratio_span = fleet.per_s / one.per_s if one.per_s > 0 else math.nan
    ratio_wall = fleet.per_s_wall / one.per_s_wall if one.per_s_wall > 0 else math.nan
    gap = abs(fleet.winner_ratio - one.winner_ratio) / min(fleet.winner_ratio, one.winner_ratio)
    same = fleet.winner == one.winner or gap <= noise
    twice = one.twice or fleet.twice
    return Verdict(ratio, ratio_span, ratio_wall, same, gap, twice, ratio >= target and same and not twice)


def report(one: RunStats, fleet: RunStats, v: Verdict) -> str:
    lines = [
        "| run | configs | rows | most rows per config | measuring s | configs/s all measuring "
        "| configs/s first to last row | wall s | configs/s end to end | winner | x copy |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|",
    ]
    for name, s in (("1 worker", one), (f"{fleet.workers} workers", fleet)):
        lines.append(
            f"| {name} | {s.distinct} | {s.rows} | {s.most_rows_per_config} | {s.measuring_s:.1f} "
            f"| {s.steady_per_s:.2f} | {s.per_s:.2f} | {s.wall_s:.1f} | {s.per_s_wall:.2f} "
            f"| `{s.winner}` | {s.winner_ratio:.3f} |"
        )
    lines.append("")
    lines.append(
        f"measuring rate {v.ratio:.2f}x one worker while all measure (target >= {TARGET_RATIO}x; "
        f"first to last row {v.ratio_span:.2f}x; end to end {v.ratio_wall:.2f}x); "
        f"winners {'the same' if v.same_winner else 'differ'} (gap {v.winner_gap:.1%} of the copy time); "
        f"{'a configuration was measured twice' if v.measured_twice else 'no configuration measured twice'}"
    )
    lines.append("verdict: " + ("meets the target" if v.meets_target else "misses the target"))
    return "\n".join(lines)


def warm_compile_cache(shape: str, dtype: str) -> float:
    """Compile every valid kernel of the shape into CuPy's disk cache, on device 0."""
    code = (
        "import cupy\n"
        "from tuner.runners.gpu.kernels import Kernels\n"
        "from variants import DTYPES, FAMILIES, Shape\n"
        "cupy.cuda.Device(0).use()\n"
        f"s, d = Shape.parse({shape!r}), DTYPES[{dtype!r}]\n"
        "work = [(f, f.name_expression(s, d, c)) for f in FAMILIES.values() for c in f.valid_configs(s, d)]\n"
        "print(len(work), 'kernels,', Kernels(FAMILIES).prepare(work), 'failed')\n"
    )
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, env=_env())
    return time.monotonic() - started


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def run(argv: list[str], log: Path) -> float:
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(
            [sys.executable, *argv], cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT
        )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}; see {log}")
    return wall


def main(args: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default=SHAPE)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--trials", type=int, default=120)
    p.add_argument("--devices", default="0,1", help="the fleet's devices (default 0,1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work-dir", type=Path, help="keep the runs here (default: a temporary directory)")
    p.add_argument("--json", type=Path, help="also write the numbers as JSON here")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    p.add_argument("--replay", type=Path, help="replay this recording instead of measuring (tests)")
    p.add_argument("--replay-delay", type=float, default=0.05)
    ns = p.parse_args(args)

    work = ns.work_dir or Path(tempfile.mkdtemp(prefix="repkv-bench-fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    workers = len(ns.devices.split(",")) if ns.devices != "all" else 0
    if ns.replay is None:
        print(f"compile cache warmed in {warm_compile_cache(ns.shape, ns.dtype):.1f} s", file=sys.stderr)
    results = {}
    for name, devices in (("one", None), ("fleet", ns.devices)):
        out = work / name
        argv = tuner_argv(
            shape=ns.shape,
            dtype=ns.dtype,
            trials=ns.trials,
            results=out,
            study=f"bench-fleet-{tag}-{name}",
            seed=ns.seed,
            devices=devices,
            replay=ns.replay,
            replay_delay=ns.replay_delay,
        )
        print(f"{name}: python {' '.join(argv)}", file=sys.stderr)
        wall = run(argv, work / f"{name}.log")
        frame, _ = load_results(out)
        n = workers or int(frame["run_id"].nunique()) if devices else 1
        results[name] = stats(frame, n, wall)
    v = verdict(results["one"], results["fleet"])
    print(report(results["one"], results["fleet"], v))
    if ns.json:
        payload = {k: asdict(s) for k, s in results.items()} | {"verdict": asdict(v)}
        ns.json.write_text(json.dumps(payload, indent=2, default=str))
    if v.measured_twice:
        return 1
    return 1 if ns.check and not v.meets_target else 0


if __name__ == "__main__":
    raise SystemExit(main())
