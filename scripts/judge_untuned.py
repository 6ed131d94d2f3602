"""The current rule judged on recorded hold-out runs, without a GPU: for every group that a
`bench_untuned.py --hold-out` run timed, what `/best` (`results.selection.select`), the header
(`bench_untuned_parts.holdout.header_choice`) and the op's race (`results.selection.shortlist`) would choose
now, from the bundled store less the group's head layout, and how fast that choice ran in the
latest run that timed it (the race: the fastest of its shortlist, where the run timed all of it;
`race_bound`: the fastest of what a run timed of it, the served one among them, an upper bound;
`race_refined`: where a `--refine` run raced the current shortlist, the race and then the step
the op takes after it on a layout never tuned, its winner against its one-parameter neighbours).
A choice no run timed is not judged. Ratios are to the run's tuned winner, timed in that run.

    python scripts/judge_untuned.py [RUN.parquet ...] [--gpu h200] [--timed-on h100]
        [--out judged.parquet] [--per-layout]

`--gpu`: whose store rows the rule is fitted on. Without files: every
`docs/runs/<timed-on>_untuned_holdout*.parquet` (`--timed-on` defaults to `--gpu`), oldest first
by the commit that last changed each (a later run's timing of a choice replaces an earlier
one's). The table of docs/untuned.md ("Where things stand") comes from this script; so does
its H100 table (`--timed-on h100`: the H200 rule, timed on an H100), and with `--per-layout`
its per-layout tables.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_untuned_parts.holdout import header_choice, without_layout  # noqa: E402

from results.header import export_table  # noqa: E402
from results.index import build_index  # noqa: E402
from results.selection import select, shortlist  # noqa: E402
from results.store import bundled_results_dir, load_results  # noqa: E402
from tuner.cli.presets import MODELS  # noqa: E402
from tuner.runners import race as race_rule  # noqa: E402
from variants import Shape, get_dtype  # noqa: E402

TARGETS = {
    "best": 1.10,
    "header": 1.10,
    "race": 1.03,
    "race_bound": 1.03,
    "race_refined": 1.03,
}  # issue targets: within 10%, 10%, 3%


@dataclass(frozen=True)
class Timed:
    """One group of one run: the tuned winner's time and every configuration timed beside it."""

    run: str
    op: str
    shape: Shape
    dtype: str
    tuned_ms: float
    times: dict[str, float]
    raced: str | None = None  # the run's race winner (bench_untuned's race over its shortlist)
    refined: float = math.nan  # with --refine: the step's pick over the tuned winner, timed together
    copy_ms: float = math.nan  # the same run's device copy of the group's bytes
    kernel1_ms: float = math.nan  # llm.c's kernel1 at block 128, in the same run


def timed_groups(frame: pd.DataFrame, run: str) -> list[Timed]:
    """A run's rows as Timed groups: the `explored` column's timings, and the served, raced,
    tuned and header columns' (a header that copied, `copy`, is no configuration)."""
    found = []
    for row in frame.to_dict("records"):
        times: dict[str, float] = {}
        if isinstance(row.get("explored"), str):
            times.update({k: v for k, v in json.loads(row["explored"]).items() if v})
        for column in ("served", "raced", "tuned", "header"):
            ms = row.get(f"{column}_ms")
            if isinstance(row.get(column), str) and ms is not None and not math.isnan(ms):
                times[row[column]] = ms
        shape = Shape(*(int(row[k]) for k in ("B", "T", "NH", "NH_KV", "HD")))
        raced = row["raced"] if isinstance(row.get("raced"), str) else None
        found.append(
            Timed(
                run=run,
                op=row["op"],
                shape=shape,
                dtype=row["dtype"],
                tuned_ms=row["tuned_ms"],
                times=times,
                raced=raced,
                refined=refined_ratio(row),
                copy_ms=_number(row.get("copy_ms")),
                kernel1_ms=_number(row.get("kernel1_ms")),
            )
        )
    return found


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not pd.isna(value) else math.nan


def refined_ratio(row: dict) -> float:
    """A --refine run's step as the op's race takes it, over the tuned winner of the same rounds
    (`refine_steps`), decided by `tuner.runners.race.choose_winner` with the raced configuration
    first; NaN without the step's timings."""
    if not isinstance(row.get("refine_steps"), str) or not isinstance(row.get("raced"), str):
        return math.nan
    times = {k: v for k, v in json.loads(row["refine_steps"]).items() if v}
    raced, tuned = row["raced"], row["tuned"]
    if raced not in times or tuned not in times:
        return math.nan
    steps = [raced, *(k for k in times if k != raced and (k != tuned or one_apart(k, raced)))]
    ranked = [race_rule.Timed(k, position, (times[k],)) for position, k in enumerate(steps)]
    return times[race_rule.choose_winner(ranked).candidate] / times[tuned]


def one_apart(key: str, other: str) -> bool:
    """Whether two configuration keys (`family[name=value,...]`) are of one family and differ in
    one parameter: the tuned winner is then among the raced one's neighbours."""

    def parsed(text: str) -> tuple[str, dict[str, str]]:
        family, _, params = text.partition("[")
        return family, dict(item.split("=", 1) for item in params.rstrip("]").split(",") if item)

    (family, a), (other_family, b) = parsed(key), parsed(other)
    return family == other_family and a.keys() == b.keys() and sum(a[k] != b[k] for k in a) == 1


def chosen(stored: pd.DataFrame, groups: Iterable[Timed], gpu: str) -> dict[tuple[str, Shape, str], dict]:
    """What the current rule chooses for each (op, shape, dtype), planned once per head layout."""
    plans: dict[tuple[str, tuple[int, int, int]], tuple] = {}
    found: dict[tuple[str, Shape, str], dict] = {}
    for group in groups:
        key = (group.op, group.shape, group.dtype)
        if key in found:
            continue
        layout = (group.op, group.shape.layout)
        if layout not in plans:
            index = build_index(without_layout(stored, group.op, group.shape)).for_op(group.op)
            plans[layout] = (index, export_table(index, gpu))
        index, table = plans[layout]
        dtype = get_dtype(group.dtype)
        header = header_choice(table, group.shape, dtype, group.op)
        found[key] = {
            "best": [select(index, gpu, group.shape, dtype).candidate.config.key],
            "header": [header.key] if header is not None else [],
            "race": [c.candidate.config.key for c in shortlist(index, gpu, group.shape, dtype)],
        }
    return found


def judge(groups: list[Timed], choices: dict[tuple[str, Shape, str], dict]) -> pd.DataFrame:
    """One row per (op, shape, dtype, choice): its ratio to the tuned winner in the latest run
    that timed it (NaN where none did)."""
    rows = []
    for key, picks in choices.items():
        runs = [g for g in groups if (g.op, g.shape, g.dtype) == key]
        # race_bound: the fastest of the shortlist's members a run timed, where it timed the
        # served one (the first): what the race reaches at worst, its other members untimed
        judged = [(what, configs, configs) for what, configs in picks.items()]
        judged.append(("race_bound", picks["race"], picks["race"][:1]))
        for what, configs, needed in judged:
            ratio, run = math.nan, None
            for timed in runs:  # oldest first: the latest run that timed the choice wins
                if needed and all(c in timed.times for c in needed):
                    fastest = min(timed.times[c] for c in configs if c in timed.times)
                    ratio, run = fastest / timed.tuned_ms, timed.run
            rows.append(_row(key, what, ratio, run))
        # race_refined: a --refine run whose race covered the current shortlist (its raced pick
        # on it, the shortlist's members all timed: `race` judged from the same run)
        ratio, run = math.nan, None
        for timed in runs:
            covered = all(c in timed.times for c in picks["race"]) or timed.raced in picks["race"]
            if not math.isnan(timed.refined) and covered:
                ratio, run = timed.refined, timed.run
        rows.append(_row(key, "race_refined", ratio, run))
    return pd.DataFrame(rows)


def _row(key: tuple[str, Shape, str], what: str, ratio: float, run: str | None) -> dict:
    return {"op": key[0], **key[1].as_dict(), "dtype": key[2], "choice": what, "ratio": ratio, "run": run}


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per op and choice: groups, judged, within its target, geometric mean and worst."""
    rows = []
    for (op, what), part in table.groupby(["op", "choice"], sort=True):
        judged = part.dropna(subset=["ratio"])
        worst = judged.loc[judged["ratio"].idxmax()] if len(judged) else None
        rows.append(
            {
                "op": op,
                "choice": what,
                "groups": len(part),
                "judged": len(judged),
                "within": int((judged["ratio"] <= TARGETS[what]).sum()),
                "geomean": math.exp(judged["ratio"].map(math.log).mean()) if len(judged) else math.nan,
                "worst": worst["ratio"] if worst is not None else math.nan,
                "worst_at": (
                    f"{worst['NH']}/{worst['NH_KV']}/{worst['HD']} {worst['dtype']} {worst['B']}x{worst['T']}"
                    if worst is not None
                    else ""
                ),
            }
        )
    return pd.DataFrame(rows)


def per_layout(table: pd.DataFrame, groups: Iterable[Timed]) -> pd.DataFrame:
    """Per op and head layout (named by its preset, where one has it): the groups judged, each
    choice's worst ratio to the tuned winner, and from the runs that timed the layout the tuned
    winner over the same run's copy (least and most) and llm.c's kernel1 over the tuned winner
    (least)."""
    names = {(m.NH, m.NH_KV, m.HD): name for name, m in MODELS.items()}
    timed: dict[tuple[str, tuple[int, int, int]], list[Timed]] = {}
    for group in groups:
        timed.setdefault((group.op, group.shape.layout), []).append(group)
    rows = []
    for (op, NH, NH_KV, HD), part in table.groupby(["op", "NH", "NH_KV", "HD"], sort=True):
        layout = (int(NH), int(NH_KV), int(HD))
        worst = part.groupby("choice")["ratio"].max()
        runs = timed.get((op, layout), [])
        over_copy = [g.tuned_ms / g.copy_ms for g in runs if not math.isnan(g.copy_ms)]
        kernel1 = [g.kernel1_ms / g.tuned_ms for g in runs if not math.isnan(g.kernel1_ms)]
        rows.append(
            {
                "op": op,
                "layout": "/".join(map(str, layout)),
                "model": names.get(layout, ""),
                "groups": int(part[["B", "T", "dtype"]].drop_duplicates().shape[0]),
                **{what: worst.get(what, math.nan) for what in TARGETS},
                "tuned_vs_copy_min": min(over_copy, default=math.nan),
                "tuned_vs_copy_max": max(over_copy, default=math.nan),
                "kernel1_vs_tuned_min": min(kernel1, default=math.nan),
            }
        )
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    """A frame as a Markdown table, ratios to three places, an unjudged cell as a dash."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return "-" if math.isnan(value) else f"{value:.3f}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def commit_time(path: Path) -> int:
    out = subprocess.run(
        ["git", "log", "-1", "--format=%ct", "--", str(path)], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return int(out) if out else 2**62  # not committed yet: the newest


def recorded_runs(gpu: str, directory: Path = ROOT / "docs" / "runs") -> list[Path]:
    """The hold-out runs timed on `gpu` in `directory`, oldest first."""
    found = directory.glob(f"{gpu}_untuned_holdout*.parquet")
    return sorted(found, key=lambda p: (commit_time(p), p.name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, help="hold-out run parquet files, oldest first")
    parser.add_argument("--gpu", default="h200", help="the store rows the rule is fitted on")
    parser.add_argument("--timed-on", help="without RUN files: this GPU's runs in docs/runs (default --gpu)")
    parser.add_argument("--out", type=Path, help="write the per-group table here (parquet)")
    parser.add_argument(
        "--per-layout", action="store_true", help="also print the per-layout table (Markdown)"
    )
    args = parser.parse_args(argv)
    runs = args.runs or recorded_runs(args.timed_on or args.gpu)
    groups = [g for path in runs for g in timed_groups(pd.read_parquet(path), path.name)]
    if not groups:
        print("no hold-out runs to judge", file=sys.stderr)
        return 1
    table = judge(groups, chosen(load_results(bundled_results_dir())[0], groups, args.gpu))
    if args.out:
        table.to_parquet(args.out, index=False)
    print(summary(table).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.per_layout:
        print()
        print(markdown(per_layout(table, groups)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
