"""The dashboards' HTML tables and summaries: the winners, the bandwidth table, the nearest
tuned shapes and what GET /best serves on a shape nobody tuned. Every link names the op of the
rows it comes from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

import variants
from results.leave_one_out import TierQuality
from results.schema import L2_COLD
from service.dashboards.urls import (
    bandwidth_url,
    e,
    gpus_url,
    link,
    rule_quality_url,
    shape_url,
    winner_links,
)
from variants import Shape


def _cell(value: object, digits: int) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return '<td class="num">-</td>'
    return f'<td class="num">{value:.{digits}f}</td>'


def _row_shape(row: object) -> Shape:
    return Shape(int(row.B), int(row.T), int(row.NH), int(row.NH_KV), int(row.HD))


def _row_op(row: object) -> str:
    op = getattr(row, "op", None)
    return op if isinstance(op, str) else variants.DEFAULT_OP


def _baseline_name(table: pd.DataFrame) -> str:
    """What the rows' speed-up is over (`Op.baseline_name`): llm.c, unless every row is of an
    op whose baseline is not llm.c's own kernel."""
    ops = {_row_op(row) for row in table.itertuples(index=False)}
    names = {variants.OPS[o].baseline_name for o in ops if o in variants.OPS}
    return names.pop() if len(names) == 1 else "llm.c"


def overview_table(table: pd.DataFrame, compare: bool = True, l2: str = L2_COLD) -> str:
    """The winners, one row per GPU, shape and dtype, each with links to its shape page,
    its /best recipe (in L2 state `l2`), its kernel source and (with `compare`) the shape on
    every GPU."""
    if table.empty:
        return '<p class="note">No results loaded yet.</p>'
    rows = []
    for row in table.itertuples(index=False):
        shape, op = _row_shape(row), _row_op(row)
        stale = "" if row.source_current else ' <span class="note">(measured with an older source)</span>'
        rows.append(
            f"<tr><td>{link(row.gpu, bandwidth_url(row.gpu, op))}</td>"
            f"<td>{link(row.shape, shape_url(row.gpu, shape, row.dtype, op))}</td>"
            f"<td>{e(row.dtype)}</td><td><code>{e(row.config_key)}</code>{stale}</td>"
            f"{_cell(row.time_ms, 4)}{_cell(row.gbps, 0)}"
            f"{_cell(row.pct_of_peak, 1)}{_cell(row.ratio_to_copy, 3)}"
            f"{_cell(row.speedup_vs_baseline, 2)}<td class='num'>{int(row.trials)}</td>"
            f"<td>{winner_links(row.gpu, shape, row.dtype, row.source_hash, l2, op)}</td>"
            + (f"<td>{link('all GPUs', gpus_url(shape, row.dtype, op))}</td>" if compare else "")
            + "</tr>"
        )
    head = (
        "<tr><th>GPU</th><th>shape</th><th>dtype</th><th>winner</th><th>ms</th><th>GB/s</th>"
        '<th title="of the peak DRAM bandwidth of the GPU (data sheet)">% of peak</th><th>time / copy</th>'
        f"<th>speed-up vs {e(_baseline_name(table))}</th><th>trials</th><th>kernel</th>"
        + ("<th></th>" if compare else "")
        + "</tr>"
    )
    return f'<table class="winners"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def bandwidth_table(table: pd.DataFrame, peak_gbps: float | None) -> str:
    if table.empty:
        return ""
    rows = []
    for row in table.itertuples(index=False):
        shape, op = _row_shape(row), _row_op(row)
        of_peak = _cell(100 * row.gbps / peak_gbps, 1) if peak_gbps else ""
        rows.append(
            f"<tr><td>{link(row.short_shape, shape_url(row.gpu, shape, row.dtype, op))}</td>"
            f"<td>{e(row.dtype)}</td>"
            f"{_cell(row.bytes_moved / 1e6, 1)}{_cell(row.gbps, 0)}{_cell(row.copy_gbps, 0)}"
            f"{of_peak}{_cell(row.ratio_to_copy, 3)}{_cell(row.ratio_to_empty_launch, 2)}"
            f"{_cell(row.baseline_gbps, 0)}"
            f"<td><code>{e(row.config_key)}</code></td>"
            f"<td>{winner_links(row.gpu, shape, row.dtype, row.source_hash, op=op)}</td></tr>"
        )
    peak_head = "<th>% of peak</th>" if peak_gbps else ""
    head = (
        '<tr><th title="B×T NH/NH_KV/HD">shape</th><th>dtype</th><th>MB moved</th><th>winner GB/s</th>'
        f"<th>copy GB/s</th>{peak_head}<th>time / copy</th>"
        '<th title="time over an empty kernel launch of the same run: below ~32 MB the copy carries a '
        'fixed cost of its own">time / empty launch</th>'
        f"<th>{e(_baseline_name(table))} GB/s</th><th>winner</th>"
        "<th>kernel</th></tr>"
    )
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def nearest_table(table: pd.DataFrame, gpu: str, op: str | None = None) -> str:
    if table.empty:
        return ""
    rows = []
    for row in table.itertuples(index=False):
        shape = _row_shape(row)
        css = ' class="serves"' if row.serves else ""
        tuned = link(str(shape), shape_url(gpu, shape, row.dtype, op))
        rows.append(
            f"<tr{css}><td>{tuned}</td><td>{e(row.dtype)}</td>"
            f"<td class='num'>{int(row.tier)}</td>{_cell(row.distance, 2)}"
            f"<td><code>{e(row.config_key)}</code></td>"
            f"{_cell(row.time_ms, 4)}<td>{'serves' if row.serves else ''}</td></tr>"
        )
    head = (
        "<tr><th>tuned shape</th><th>dtype</th><th>tier</th><th>distance</th><th>its winner</th>"
        "<th>ms there</th><th></th></tr>"
    )
    return (
        "<h2>Nearest tuned shapes, in the order the selection rule tries them</h2>"
        '<p class="note">Tier 0: same dtype and head layout; 1: same dtype; 2: another dtype. '
        "Distance: |log2 ratio of B·T| + |log2 ratio of bytes moved| + |log2 ratio of nrep|. "
        "Within a tuned shape, configurations go fastest first; one whose constraints reject "
        "the requested shape is skipped.</p>"
        f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _tuned_link(served: Mapping[str, Any]) -> str:
    """The tuned shape and dtype a served configuration comes from, linked to its page."""
    tuned, tuned_dtype = served["tuned_shape"], str(served["tuned_dtype"])
    page = shape_url(str(served["measured_gpu"]), tuned, tuned_dtype, served.get("op"))
    return link(f"{tuned} {tuned_dtype}", page)


def served_summary(served: Mapping[str, Any], shape: Shape, dtype: str) -> str:
    """What GET /best serves for a shape nobody tuned on this GPU."""
    gpu = str(served["gpu"])
    ratio = served["ratio_to_copy"]
    gbps = served["gbps"]
    measured = f"{served['time_ms']:.4f} ms"
    if isinstance(ratio, float):
        measured += f", {ratio:.3f}x the copy"
    if isinstance(gbps, float):
        measured += f", {gbps:.0f} GB/s"
    op = served.get("op")
    rank = int(served["rank"])
    which = "" if rank == 0 else f", its configuration number {rank + 1}"
    source = winner_links(gpu, shape, dtype, served["source_hash"], op=op)
    return (
        '<div class="summary served">'
        f"<p><b>Not tuned on {e(gpu)}.</b> GET /best serves the configuration of the nearest tuned shape:</p>"
        f"<p><code>{e(served['config_key'])}</code>, launched for this shape as grid {served['grid']} "
        f"x block {served['block']} ({source})</p>"
        f"<p>It comes from {_tuned_link(served)} (tier {served['tier']}, "
        f"distance {float(served['distance']):.2f}{which}), where it measured {e(measured)}.</p>"
        f"{rule_quality_note(served.get('rule_quality'), str(served['measured_gpu']), op)}</div>"
    )


def served_by_gpu_table(served: list[Mapping[str, Any]], shape: Shape, dtype: str) -> str:
    """What GET /best serves on each GPU for a shape and dtype no GPU tuned: one row per GPU,
    linking to that GPU's page of the shape (the served configuration in full)."""
    rows = []
    for answer in served:
        gpu, op = str(answer["gpu"]), answer.get("op")
        rows.append(
            f"<tr><td>{link(gpu, shape_url(gpu, shape, dtype, op))}</td>"
            f"<td><code>{e(answer['config_key'])}</code></td><td>{_tuned_link(answer)}</td>"
            f"<td class='num'>{int(answer['tier'])}</td>{_cell(float(answer['distance']), 2)}"
            f"{_cell(answer['time_ms'], 4)}{_cell(answer['ratio_to_copy'], 3)}</tr>"
        )
    head = (
        "<tr><th>GPU</th><th>served configuration</th><th>from the tuned shape</th><th>tier</th>"
        "<th>distance</th><th>ms there</th><th>time / copy there</th></tr>"
    )
    return (
        '<div class="summary served"><p><b>No GPU tuned this shape and dtype.</b> GET /best serves '
        "each GPU the configuration of its nearest tuned shape; each GPU's link shows it in full.</p></div>"
        f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def rule_quality_note(quality: TierQuality | None, gpu: str, op: str | None = None) -> str:
    """How answers of the served tier have done, leave-one-out (results.leave_one_out's
    TierQuality, as GET /best gives it), in one paragraph; empty without it."""
    if quality is None:
        return ""
    every = link("every tier", rule_quality_url(gpu, op))
    if quality.median_slowdown is None:
        return f'<p class="note">How this rule has done: {e(quality.reason)} ({every}).</p>'
    return (
        f'<p class="note">How this rule has done: of the tuned shapes of {e(gpu)} that, left out, '
        f"were answered from tier {quality.tier} ({quality.held_out}), {quality.judged} had measured "
        f"the configuration served to them: it ran a median {quality.median_slowdown:.3f}x their "
        f"own best (p90 {quality.p90_slowdown:.3f}x, worst {quality.worst_slowdown:.3f}x; {every}).</p>"
    )
