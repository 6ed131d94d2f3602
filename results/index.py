"""An in-memory index of the results store, built once per load and never mutated.

`build_index` turns trial rows into what the routes need: per (GPU, shape, dtype) the
correct configurations, fastest first, one row per configuration; per GPU a summary.
Answering a request then only walks small Python lists.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict, namedtuple
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

import variants
from results.best import baseline_times, in_l2_state, ranked
from results.bounded_cache import CHOICE_CACHE_SIZE, BoundedCache
from results.cells import finite_or_none, int_or_none, json_object_or_none, str_or_none, timestamp_or_none
from results.schema import GROUP_COLUMNS, L2_COLD, Status, check_l2, hold_or_zero, rows_of_op, with_op
from results.store import LoadReport
from variants import Config, DType, Family, Shape

if TYPE_CHECKING:
    from results.leave_one_out import RuleQuality

log = logging.getLogger(__name__)

# (gpu, (B, T, NH, NH_KV, HD), dtype name)
GroupKey = tuple[str, tuple[int, int, int, int, int], str]


@dataclass(frozen=True)
class Candidate:
    """One correct configuration measured at one tuned shape: the ok trial that stands for it
    (`results.best.ranked`: its fastest, of those timed as the tuner times where it has any)."""

    family: Family
    config: Config
    params: Mapping[str, Any]
    time_ms: float
    p20_ms: float | None
    p80_ms: float | None
    gbps: float | None
    ratio_to_copy: float | None
    gpu_name: str | None
    sm_count: int | None
    source_hash: str | None
    timestamp: datetime | None
    run_id: str
    empty_launch_ms: float | None = None  # the same run's empty launch, where it was measured
    hold_us: float = 0.0  # the GPU-side wait before each timed call (results.schema.DEFAULT_HOLD_US)
    copy_method: str | None = None  # how its copy was timed (results.schema.COPY_FASTEST; None: memcpy)

    @property
    def config_key(self) -> str:
        return self.config.key


@dataclass(frozen=True)
class TunedGroup:
    """Every correct configuration of one tuned (GPU, shape, dtype), in the order served
    (`results.best.ranked`: fastest first, those timed as the tuner times ahead of the rest)."""

    gpu: str
    shape: Shape
    dtype: DType
    candidates: tuple[Candidate, ...]
    baseline_ms: float | None
    trials: int
    l2: str = L2_COLD  # the L2 state its candidates were timed in (results.schema.L2_STATES)
    op: str = variants.DEFAULT_OP  # the op whose rows these are (variants.OPS)

    @property
    def key(self) -> GroupKey:
        return (self.gpu, shape_tuple(self.shape), self.dtype.name)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    @functools.cached_property
    def comparable_times(self) -> dict[str, float]:
        """config key -> time here, for the configurations timed as the group's best was (with
        the same hold: times taken otherwise are not comparable). Built once per group."""
        hold = self.best.hold_us
        times: dict[str, float] = {}
        for candidate in self.candidates:
            if candidate.hold_us == hold:
                times.setdefault(candidate.config_key, candidate.time_ms)
        return times

    def time_of(self, config_key: str) -> float | None:
        """The configuration's time here (`comparable_times`); None where it has none."""
        return self.comparable_times.get(config_key)

    @functools.cached_property
    def families(self) -> frozenset[str]:
        """The families of its correct configurations."""
        return frozenset(candidate.family.name for candidate in self.candidates)

    @functools.cached_property
    def partial(self) -> bool:
        """Whether it is a search of one family only, not a tuning of the op: all its correct
        configurations are of one family while at least two of the op's families serve its shape
        and dtype (`python -m tuner --family X` at a shape nothing else tuned). Worked out once."""
        if len(self.families) != 1:
            return False
        serving = [
            family
            for family in variants.get_op(self.op).families.values()
            if family.valid_configs(self.shape, self.dtype)
        ]
        return len(serving) >= 2


@dataclass(frozen=True)
class GpuSummary:
    label: str
    gpu_names: tuple[str, ...]
    compute_capability: str | None
    sm_count: int | None
    trials: int
    ok_trials: int
    tuned: int  # (shape, dtype) pairs with at least one correct configuration
    dtypes: tuple[str, ...]
    last_measured: datetime | None


@dataclass(frozen=True, eq=False)
class StoreIndex:
    """Compared and hashed by identity: a new load is a new index, and caches keyed by the
    index die with it."""

    frame: pd.DataFrame  # every trial row, as loaded
    report: LoadReport
    groups: dict[GroupKey, TunedGroup]
    gpus: dict[str, GpuSummary]
    loaded_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    unusable_rows: int = 0  # ok rows whose family or params the current code does not know
    by_gpu: dict[str, tuple[TunedGroup, ...]] = field(default_factory=dict)
    # the same rows as `frame`, in the same order, as the store read them (None: not kept)
    table: pa.Table | None = field(default=None, repr=False)
    # configurations already chosen over this index (owned by results.selection)
    choices: BoundedCache = field(default_factory=lambda: BoundedCache(CHOICE_CACHE_SIZE), repr=False)
    # per GPU with results, the leave-one-out figures per tier (owned by results.leave_one_out)
    rule_quality: dict[str, RuleQuality] = field(default_factory=dict, repr=False)
    # the L2 state whose rows the groups rank (results.schema.L2_STATES); `frame` holds all
    l2: str = L2_COLD
    # the same rows indexed in the other L2 states, built on first use (see `in_state`)
    _states: dict[str, StoreIndex] = field(default_factory=dict, repr=False)
    # the op whose rows the groups hold (variants.OPS); `frame` holds every op's
    op: str = variants.DEFAULT_OP
    # the same rows indexed for the other ops, built on first use (see `for_op`)
    _ops: dict[str, StoreIndex] = field(default_factory=dict, repr=False)

    def for_op(self, op: str) -> StoreIndex:
        """The index that serves op `op` (UnknownOp for one outside variants.OPS), cold: its
        groups are that op's tuned (GPU, shape, dtype)."""
        variants.get_op(op)
        root = self._ops.get("", self) if self.op != variants.DEFAULT_OP else self
        root = root if root.l2 == L2_COLD else root.in_state(L2_COLD)
        if op == root.op:
            return root
        if op not in root._ops:
            built = build_index(root.frame, root.report, root.table, op=op)
            built._ops[""] = root
            root._ops[op] = built
        return root._ops[op]

    def in_state(self, l2: str) -> StoreIndex:
        """The index that serves L2 state `l2` (ValueError for an unknown one): each tuned
        (GPU, shape, dtype) ranks its rows timed in that state where it has any, its cold
        ones elsewhere (each group's `l2` says which), so that a shape never tuned in the
        state is served as it always was."""
        if check_l2(l2) == self.l2:
            return self
        if l2 not in self._states:
            cold = self if self.l2 == L2_COLD else self.in_state(L2_COLD)
            state = build_index(self.frame, self.report, self.table, l2=l2, op=self.op)
            merged = with_groups(state, {**cold.groups, **state.groups})
            merged._states[L2_COLD] = cold
            self._states[l2] = merged
        return self._states[l2]

    def groups_of(self, gpu: str) -> tuple[TunedGroup, ...]:
        return self.by_gpu.get(gpu, ())

    def available_gpus(self) -> list[str]:
        return sorted(self.by_gpu)


def shape_tuple(shape: Shape) -> tuple[int, int, int, int, int]:
    return (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)


def parse_config(
    family_name: str, params_json: str, op: str = variants.DEFAULT_OP
) -> tuple[Family, Config, dict[str, Any]] | None:
    """The current family and a checked Config for a row of `op`, or None if the code no
    longer knows it."""
    try:
        family = variants.get_op(op).family(family_name)
        params = json_object_or_none(params_json)
        if params is None:
            return None
        params = family.completed(params)
        config = Config(family.name, tuple(sorted(params.items())))
        family.validate(config)
    except (variants.UnknownFamily, variants.InvalidConfig, ValueError, TypeError):
        return None
    return family, config, params


# a row's columns: its group's, then a Candidate's (whose config is made from family and params)
_CELLS = [f.name for f in fields(Candidate) if f.name != "config"]
_IndexRow = namedtuple("_IndexRow", [*GROUP_COLUMNS, *_CELLS])


def build_index(
    frame: pd.DataFrame,
    report: LoadReport | None = None,
    table: pa.Table | None = None,
    l2: str = L2_COLD,
    op: str = variants.DEFAULT_OP,
) -> StoreIndex:
    """Index trial rows. Only status ok rows with a finite positive time, timed in L2 state
    `l2`, become candidates (the store's loader drops the others; rows built in memory are
    held to it here too). `table`, when given, is the same rows as arrow (the exports stream
    from it)."""
    report = report or LoadReport()
    group_cols = list(GROUP_COLUMNS)
    check_l2(l2)
    all_rows = frame
    frame = with_op(rows_of_op(frame, op))
    fastest = ranked(frame, l2)

    baselines = {
        tuple(row[:-1]): float(row[-1])
        for row in baseline_times(frame, l2)[[*group_cols, "baseline_ms"]].itertuples(index=False, name=None)
    }
    state_rows = in_l2_state(frame, l2)
    trials = (
        {tuple(k): int(n) for k, n in state_rows.groupby(group_cols).size().items()}
        if len(state_rows)
        else {}
    )

    per_group: dict[tuple, list[Candidate]] = defaultdict(list)
    unusable = 0
    columns = list(_IndexRow._fields)
    # a frame that did not go through the store's schema
    for optional in ("empty_launch_ms", "hold_us", "copy_method"):
        if optional not in fastest:
            fastest = fastest.assign(**{optional: np.nan})
    parsed_config = functools.cache(functools.partial(parse_config, op=op))  # once per configuration
    # column lists zipped: a third of the time of itertuples over the store's arrow-backed columns
    rows = zip(*(fastest[c].tolist() for c in columns), strict=True)
    for row in map(_IndexRow._make, rows):
        parsed = parsed_config(row.family, row.params)
        if parsed is None:
            unusable += 1
            continue
        family, config, params = parsed
        per_group[(row.gpu, op, row.B, row.T, row.NH, row.NH_KV, row.HD, row.dtype)].append(
            Candidate(
                family=family,
                config=config,
                params=dict(params),  # each candidate its own
                time_ms=float(row.time_ms),
                p20_ms=finite_or_none(row.p20_ms),
                p80_ms=finite_or_none(row.p80_ms),
                gbps=finite_or_none(row.gbps),
                ratio_to_copy=finite_or_none(row.ratio_to_copy),
                gpu_name=str_or_none(row.gpu_name),
                sm_count=int_or_none(row.sm_count),
                source_hash=str_or_none(row.source_hash),
                timestamp=timestamp_or_none(row.timestamp),
                run_id=str(row.run_id),
                empty_launch_ms=finite_or_none(row.empty_launch_ms),
                hold_us=hold_or_zero(row.hold_us),
                copy_method=str_or_none(row.copy_method),
            )
        )

    groups: dict[GroupKey, TunedGroup] = {}
    for key, candidates in per_group.items():
        gpu, _op, b, t, nh, nh_kv, hd, dtype_name = key
        try:
            shape = Shape(int(b), int(t), int(nh), int(nh_kv), int(hd))
            dtype = variants.get_dtype(dtype_name)
        except (variants.InvalidShape, variants.UnknownDType) as exc:
            log.warning("ignoring tuned group %s: %s", key, exc)
            continue
        group = TunedGroup(
            gpu=str(gpu),
            shape=shape,
            dtype=dtype,
            candidates=tuple(candidates),
            baseline_ms=baselines.get(key),
            trials=trials.get(key, len(candidates)),
            l2=l2,
            op=op,
        )
        groups[group.key] = group
    if unusable:
        log.warning("%d configurations name a family or parameters the current code does not know", unusable)
    index = StoreIndex(
        frame=all_rows, report=report, groups={}, gpus={}, unusable_rows=unusable, table=table, l2=l2, op=op
    )
    return with_groups(index, groups)


def with_groups(index: StoreIndex, groups: Mapping[GroupKey, TunedGroup]) -> StoreIndex:
    """`index` with these groups (sorted), its per-GPU lists and summaries made from them."""
    ordered = dict(sorted(groups.items()))
    by_gpu: dict[str, list[TunedGroup]] = defaultdict(list)
    for group in ordered.values():
        by_gpu[group.gpu].append(group)
    return replace(
        index,
        groups=ordered,
        by_gpu={gpu: tuple(found) for gpu, found in by_gpu.items()},
        gpus=summarize_gpus(index.frame, ordered),
        choices=BoundedCache(CHOICE_CACHE_SIZE),
        rule_quality={},
        _states={},
    )


def summarize_gpus(frame: pd.DataFrame, groups: Mapping[GroupKey, TunedGroup]) -> dict[str, GpuSummary]:
    summaries: dict[str, GpuSummary] = {}
    if frame.empty:
        return summaries
    ok_mask = frame["status"] == Status.OK
    for label, rows in frame.groupby("gpu", sort=True):
        names = tuple(sorted({n for n in rows["gpu_name"].dropna().unique() if isinstance(n, str)}))
        capabilities = rows["compute_capability"].dropna()
        sm_counts = rows["sm_count"].dropna()
        tuned = [g for k, g in groups.items() if k[0] == label]
        summaries[str(label)] = GpuSummary(
            label=str(label),
            gpu_names=names,
            compute_capability=str(capabilities.iloc[-1]) if len(capabilities) else None,
            sm_count=int(sm_counts.iloc[-1]) if len(sm_counts) else None,
            trials=len(rows),
            ok_trials=int(ok_mask[rows.index].sum()),
            tuned=len(tuned),
            dtypes=tuple(sorted({g.dtype.name for g in tuned})),
            last_measured=timestamp_or_none(rows["timestamp"].max()),
        )
    return summaries
