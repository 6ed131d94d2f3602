"""What a run shows: a progress bar per study and the table of winners; and the variants.

The winners come from `results.best.winners` (one selection rule for the CLI and the
service); this module only shapes them into a table and draws it.
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
from typing import Any, TextIO

import pandas as pd

from results.best import winners
from results.peaks import frac_peak
from results.schema import L2_COLD, SHAPE_COLUMNS
from tuner.cli.plain_table import plain_table
from tuner.study.plan import BUDGET_MET, StudyOutcome, StudyPlan
from variants import DEFAULT_OP, DTYPES, Shape, get_op

WINNER_COLUMNS = (
    "gpu",
    "shape",
    "dtype",
    "config",
    "time_ms",
    "gbps",
    "frac_peak",
    "ratio_to_copy",
    "ratio_to_empty_launch",
    "speedup_vs_baseline",
)


WINNER_HEADINGS = (  # the winners table's columns as drawn, and how each is justified
    ("gpu", "left"),
    ("shape", "left"),
    ("dtype", "left"),
    ("best configuration", "left"),
    ("time", "right"),
    ("GB/s", "right"),
    ("% peak", "right"),
    ("x copy", "right"),
    ("x empty launch", "right"),
    ("vs llm.c", "right"),
)


def config_text(family: str, params: str) -> str:
    values = json.loads(params) if params else {}
    return f"{family}[{','.join(f'{k}={v}' for k, v in sorted(values.items()))}]"


def winners_table(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """One row per GPU, shape and dtype: the fastest correct configuration timed in L2 state
    `l2`, its time, bandwidth, ratio to the same-run copy and speed-up over llm.c's
    configuration."""
    if frame.empty or "status" not in frame:
        return pd.DataFrame(columns=list(WINNER_COLUMNS))
    best = winners(frame, l2)
    if best.empty:
        return pd.DataFrame(columns=list(WINNER_COLUMNS))
    shape = best[list(SHAPE_COLUMNS)].apply(
        lambda r: ",".join(f"{c}={int(r[c])}" for c in SHAPE_COLUMNS), axis=1
    )
    return pd.DataFrame(
        {
            "gpu": best["gpu"],
            "shape": shape,
            "dtype": best["dtype"],
            "config": [config_text(f, p) for f, p in zip(best["family"], best["params"], strict=True)],
            "time_ms": best["time_ms"].astype(float),
            "gbps": pd.to_numeric(best["gbps"], errors="coerce"),
            "frac_peak": [
                frac_peak(g, n)
                for g, n in zip(pd.to_numeric(best["gbps"], errors="coerce"), best["gpu_name"], strict=True)
            ],
            "ratio_to_copy": pd.to_numeric(best["ratio_to_copy"], errors="coerce"),
            "ratio_to_empty_launch": best["time_ms"].astype(float)
            / pd.to_numeric(best["empty_launch_ms"], errors="coerce"),
            "speedup_vs_baseline": best["speedup_vs_baseline"].astype(float),
        }
    )


def _fmt(value: Any, spec: str, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:{spec}}{suffix}"


def _is_terminal(file: TextIO) -> bool:
    isatty = getattr(file, "isatty", None)
    return bool(isatty and isatty())


def render_winners(
    table: pd.DataFrame, file: TextIO | None = None, title: str = "Winners", baseline: str = "llm.c"
) -> None:
    """The winners as a table: as wide as the terminal, a configuration too long for it folded
    onto the next line; elsewhere (a pipe, a file) as wide as the table, nothing cut. Without
    rich (an install without the tuner extra), as plain text."""
    file = file or sys.stdout
    terminal = _is_terminal(file)
    # the last column: the speed-up over the op's baseline (`Op.baseline_name`)
    headings = (*WINNER_HEADINGS[:-1], (f"vs {baseline}", WINNER_HEADINGS[-1][1]))
    if table.empty:
        print("no correct measurement to report", file=file)
        return
    cells = [
        [
            row.gpu,
            row.shape,
            row.dtype,
            row.config,
            _fmt(row.time_ms, ".4f", " ms"),
            _fmt(row.gbps, ".0f"),
            _fmt(None if row.frac_peak is None else 100 * row.frac_peak, ".1f", "%"),
            _fmt(row.ratio_to_copy, ".3f"),
            _fmt(row.ratio_to_empty_launch, ".2f", "x"),
            _fmt(row.speedup_vs_baseline, ".2f", "x"),
        ]
        for row in table.itertuples(index=False)
    ]
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:
        print(plain_table(title, headings, cells), file=file)
        return
    out = Table(title=title, show_lines=False)
    for name, justify in headings:
        out.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row_cells in cells:
        out.add_row(*row_cells[:3], escape(row_cells[3]), *row_cells[4:])
    width = None if terminal else Console(width=1 << 20).measure(out).maximum
    Console(file=file, width=width).print(out)


def write_winners(table: pd.DataFrame, fmt: str, file: TextIO | None = None) -> None:
    """The winners table as JSON (a list of objects; a time that is not finite is null) or CSV."""
    out = file or sys.stdout
    table = table[list(WINNER_COLUMNS)]
    if fmt == "csv":
        table.to_csv(out, index=False, lineterminator="\n")
        return
    if fmt != "json":
        raise ValueError(f"unknown format {fmt!r}: table, json or csv")
    records = [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        for record in table.astype(object).to_dict(orient="records")
    ]
    json.dump(records, out, indent=2)
    out.write("\n")


def render_outcomes(outcomes: list[StudyOutcome], file: TextIO | None = None) -> None:
    """Per study: what was measured, answered, failed, or missing from a recording."""
    lines = []
    for o in outcomes:
        fails = ", ".join(f"{n} {s}" for s, n in sorted(o.failures.items()))
        parts = [f"{len(o.measured)} measured", f"{o.answered} answered without measuring"]
        if fails:
            parts.append(f"failures: {fails}")
        if o.missing:
            parts.append(f"{o.missing} not in the recording")
        if o.again:
            parts.append(f"{o.again} leaders of other runs measured again")
        if not o.measured and not o.answered and (already := already_done(o)):
            parts = [already]
        lines.append(f"{o.plan.shape} {o.plan.dtype.name}: {'; '.join(parts)}")
    print("\n".join(lines), file=file or sys.stdout)


def already_done(o: StudyOutcome) -> str | None:
    """Why a study had nothing to do, when its budget was met before this run asked a trial."""
    if o.ended != BUDGET_MET or o.held < o.goal or o.goal == 0:
        return None
    if o.goal >= o.space_size:
        return f"the study already holds all {o.goal} configurations of its space"
    return f"the study already holds its {o.goal} trials; a larger --trials asks for more"


_NUMBER = re.compile(r"(?<![\w^.])\d+(?:\.\d+)?(?![\w^])")


def exclusion_groups(reasons: list[str]) -> list[tuple[int, str]]:
    """Reasons grouped once their numbers are set aside ("a 4-byte vector ..." and "a 8-byte
    vector ..." are one group), most frequent first. A number that differs within a group
    shows as N; one that every member shares is kept."""
    groups: dict[tuple[str, ...], list[list[str]]] = {}
    for reason in reasons:
        parts = _NUMBER.split(reason)
        groups.setdefault(tuple(parts), []).append(_NUMBER.findall(reason))
    out = []
    for parts, numbers in groups.items():
        shown = [column[0] if len(set(column)) == 1 else "N" for column in zip(*numbers, strict=True)]
        text = "".join(p + (shown[i] if i < len(shown) else "") for i, p in enumerate(parts))
        out.append((len(numbers), text))
    return sorted(out, key=lambda group: (-group[0], group[1]))


def render_variants(
    shapes: list[Shape], dtypes: list[str], file: TextIO | None = None, op: str = DEFAULT_OP
) -> None:
    """Each family of `op`: its doc, parameters and how many of its configurations are valid at
    each shape and dtype, and why the others are excluded (counts per reason); then all its
    families together."""
    families = get_op(op).families
    lines = [f"{op}: {len(families)} families"]
    for family in families.values():
        lines.append(f"{family.name}: {family.doc}")
        width = max([10, *(len(param.name) for param in family.params)])  # blocks_per_sm is 13
        for param in family.params:
            lines.append(f"  {param.name:<{width}} {', '.join(map(str, param.choices)):<40} {param.doc}")
        space = list(family.space())
        for shape in shapes:
            counts = ", ".join(f"{d} {len(family.valid_configs(shape, DTYPES[d]))}" for d in dtypes)
            lines.append(f"  valid of {len(space)} at {shape}: {counts}")
            for d in dtypes:
                reasons = [r for c in space if (r := family.rejection(shape, DTYPES[d], c))]
                if reasons:
                    lines.append(f"    {d} excludes {len(reasons)}:")
                    lines += [f"      {n:>4}  {text}" for n, text in exclusion_groups(reasons)]
    for shape in shapes:
        counts = ", ".join(
            f"{d} {sum(len(f.valid_configs(shape, DTYPES[d])) for f in families.values())}" for d in dtypes
        )
        lines.append(f"all families at {shape}: {counts}")
    print("\n".join(lines), file=file or sys.stdout)


class ProgressBars:
    """A tqdm bar per study: configurations done out of the goal, best x copy so far."""

    def __init__(self, enabled: bool = True, file: TextIO | None = None) -> None:
        self.enabled = enabled
        self.file = file or sys.stderr
        self._bar: Any = None

    def __call__(self, plan: StudyPlan):  # -> ProgressHook | None
        if not self.enabled:
            return None
        from tqdm import tqdm

        self.close()
        self._bar = tqdm(
            total=None, desc=f"{plan.shape} {plan.dtype.name}", unit="cfg", file=self.file, leave=True
        )

        def hook(done: int, goal: int, best: float) -> None:
            bar = self._bar
            if bar.total != goal:
                bar.total = goal
            bar.n = done
            bar.set_postfix_str(f"best {best:.3f}x copy" if math.isfinite(best) else "", refresh=False)
            bar.refresh()

        return hook

    def close(self, *_: object) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class CounterBar:
    """One tqdm bar on standard error for a long command (`check`, `replay-eval`), fed with
    (done, total) or with increments (safe from several threads); shows nothing when disabled."""

    def __init__(
        self, enabled: bool, desc: str, unit: str, total: int | None = None, file: TextIO | None = None
    ):
        try:
            from tqdm import tqdm
        except ImportError:  # the tuner extra is not installed: no bar
            from tuner.cli.extra import NoBar as tqdm  # type: ignore[assignment]

        self._bar = tqdm(total=total, desc=desc, unit=unit, file=file or sys.stderr, disable=not enabled)
        self._lock = threading.Lock()

    def __call__(self, done: int, total: int) -> None:
        with self._lock:
            if self._bar.total != total:
                self._bar.total = total
            self._bar.update(done - self._bar.n)

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self._bar.update(n)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> CounterBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
