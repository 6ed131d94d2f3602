"""On the GPU: measure what a nearest-shape answer would really cost.

Leave-one-out (`results.leave_one_out`) answers each tuned shape from the others and compares
the served configuration's recorded time there with the optimum there. Where the served
configuration was never measured at the held-out shape, this script measures it (validated,
timed, in the tuner's worker process) and files the rows in the results store, so that every
answer is judged by a measurement. It then prints the leave-one-out table and summary.

Output: the new rows (in `--into`, else the results directory), the leave-one-out table printed
and, with `--out FILE`, written as parquet; the figures of docs/untuned.md ("Nearest answers,
measured") come from its H200 run, `docs/runs/h200_leave_one_out.txt` and `.parquet`.

    python scripts/measure_nearest.py --gpu h200 --results results/data --out loo.parquet
    python scripts/measure_nearest.py --gpu h200 --into $OUT/rows   # new rows elsewhere
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results.leave_one_out import leave_one_out, summarize  # noqa: E402
from results.store import load_results  # noqa: E402
from tuner.run.rows import ResultsSink, StudyInfo, new_run_id, trial_row  # noqa: E402
from variants import Config, Shape, get_dtype  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", required=True, help="label of the GPU's results, e.g. h200")
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "data")
    parser.add_argument(
        "--into", type=Path, help="results directory the new rows go to (default: --results; read too)"
    )
    parser.add_argument("--out", type=Path, help="write the leave-one-out table here (parquet)")
    args = parser.parse_args(argv)

    into = args.into or args.results
    sources = [args.results] if into == args.results else [args.results, into]
    frame, _ = load_results(sources)
    frame = frame[frame["gpu"] == args.gpu]
    table = leave_one_out(frame)
    missing = table[table["served_config"].notna() & table["served_ms"].isna()]
    print(f"{len(table)} tuned groups; {len(missing)} served configurations never measured there")
    if len(missing):
        from tuner.runners.gpu.runner import GpuRunner

        params = frame.drop_duplicates("config_key").set_index("config_key")[["family", "params"]]
        run_id = new_run_id()
        sink = ResultsSink(into, args.gpu, run_id)
        with GpuRunner() as runner:
            for _, r in missing.iterrows():
                shape = Shape(*(int(r[k]) for k in ("B", "T", "NH", "NH_KV", "HD")))
                dtype = get_dtype(r["dtype"])
                family, raw = params.loc[r["served_config"]]
                config = Config(family, tuple(sorted(json.loads(raw).items())))
                measurement = runner.measure(shape, dtype, config)
                info = StudyInfo(gpu=args.gpu, run_id=run_id, study="leave-one-out", sampler="nearest")
                sink.append(
                    trial_row(
                        runner.identity,
                        shape,
                        dtype,
                        config,
                        measurement,
                        runner.copy_time(shape, dtype),
                        info,
                    )
                )
                print(f"{shape} {dtype.name} {config.key}: {measurement.status} {measurement.time_ms:.4f} ms")
        sink.flush()
        frame, _ = load_results(sources)
        table = leave_one_out(frame[frame["gpu"] == args.gpu])
    columns = ["B", "T", "NH", "NH_KV", "HD", "dtype", "served_from", "served_config", "slowdown"]
    print(table[columns].to_string(index=False))
    print(summarize(table))
    if args.out:
        table.to_parquet(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
