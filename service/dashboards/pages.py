"""HTML pages around plotly figures. Figures travel as JSON in <script type="application/json">
(with '<' escaped), drawn by plotly.js served from this app (/static/plotly.min.js)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go

from results.leave_one_out import TierQuality
from results.schema import L2_COLD
from variants import Shape

STYLE = """
body{font-family:system-ui,sans-serif;margin:1rem 1.2rem;color:#222;max-width:1500px}
nav a{margin-right:1rem} h1{margin:.6rem 0 .4rem;font-size:1.6rem}
table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0 1rem}
td,th{border-bottom:1px solid #ddd;padding:.22rem .45rem;text-align:left;white-space:nowrap}
th{background:#f5f5f5} tr.serves td{background:#fff7e0}
td.num{text-align:right;font-variant-numeric:tabular-nums} .chart{min-height:380px;margin:1rem 0}
.note{color:#666;font-size:.9rem} .pickers{display:flex;gap:1.2rem;flex-wrap:wrap;margin:.4rem 0 .8rem}
.pickers label{font-size:.9rem;color:#444} .pickers select{margin-left:.35rem;font-size:.9rem}
.summary{background:#f7f9fc;border:1px solid #e1e6ef;border-radius:6px;padding:.6rem .9rem;margin:.6rem 0}
.summary p{margin:.25rem 0} code{font-size:.88rem}
td code{font-size:.8rem;white-space:normal;overflow-wrap:anywhere}
"""


def _json_for_script(text: str) -> str:
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def e(value: object) -> str:
    return html.escape(str(value))


def page(title: str, body: str, figures: Sequence[go.Figure] = (), after: str = "") -> str:
    """A page: `body`, then the figures, then `after` (e.g. a long table)."""
    charts = []
    for number, fig in enumerate(figures):
        charts.append(
            f'<div id="chart-{number}" class="chart"></div>'
            f'<script type="application/json" id="spec-{number}">{_json_for_script(fig.to_json())}</script>'
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)} - repkv-tune</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><style>{STYLE}</style>
<script src="/static/plotly.min.js"></script></head>
<body><nav><a href="/dashboards">Overview</a><a href="/dashboards/bandwidth">Bandwidth</a>
<a href="/docs">API</a><a href="/readyz">Status</a></nav>
<h1>{e(title)}</h1>
{body}
{"".join(charts)}
{after}
<script>
document.querySelectorAll('script[id^="spec-"]').forEach(function (el) {{
  var spec = JSON.parse(el.textContent);
  Plotly.newPlot(el.id.replace("spec-", "chart-"), spec.data, spec.layout,
                 {{responsive: true, displaylogo: false}});
}});
</script></body></html>"""


# Links ------------------------------------------------------------------------------------


def shape_query(shape: Shape, dtype: str) -> dict[str, object]:
    return {**shape.as_dict(), "dtype": dtype}


def best_url(gpu: str, shape: Shape, dtype: str, l2: str = L2_COLD) -> str:
    """The recipe GET /best answers with for this GPU, shape and dtype (in L2 state `l2`)."""
    state = {} if l2 == L2_COLD else {"l2": l2}
    return "/best?" + urlencode({"gpu": gpu, **shape_query(shape, dtype), **state})


def kernel_url(source_hash: str) -> str:
    return f"/kernels/{source_hash}"


def shape_url(gpu: str | None, shape: Shape, dtype: str) -> str:
    query = ({"gpu": gpu} if gpu else {}) | shape_query(shape, dtype)
    return "/dashboards/shape?" + urlencode(query)


def gpus_url(shape: Shape, dtype: str) -> str:
    return "/dashboards/gpus?" + urlencode(shape_query(shape, dtype))


def bandwidth_url(gpu: str | None = None) -> str:
    return "/dashboards/bandwidth" + ("?" + urlencode({"gpu": gpu}) if gpu else "")


def overview_url(gpu: str | None = None, dtype: str | None = None) -> str:
    query = {k: v for k, v in (("gpu", gpu), ("dtype", dtype)) if v}
    return "/dashboards" + ("?" + urlencode(query) if query else "")


def rule_quality_url(gpu: str) -> str:
    return "/rule-quality?" + urlencode({"gpu": gpu})


def link(text: str, href: str) -> str:
    return f'<a href="{e(href)}">{e(text)}</a>'


def winner_links(gpu: str, shape: Shape, dtype: str, source_hash: object, l2: str = L2_COLD) -> str:
    """'recipe' (GET /best) and 'source' (GET /kernels/{hash}) links of one winner."""
    links = [f'<a class="recipe" href="{e(best_url(gpu, shape, dtype, l2))}">recipe</a>']
    if isinstance(source_hash, str) and source_hash:
        links.append(f'<a class="source" href="{e(kernel_url(source_hash))}">source</a>')
    return " · ".join(links)


# Pickers ----------------------------------------------------------------------------------


def picker(label: str, options: Sequence[tuple[str, str, bool]]) -> str:
    """A select that loads the chosen option's URL: options are (text, href, selected)."""
    items = "".join(
        f'<option value="{e(href)}"{" selected" if selected else ""}>{e(text)}</option>'
        for text, href, selected in options
    )
    name = e(label.lower())
    return (
        f'<label>{e(label)}<select name="{name}" data-picker="{name}" '
        f'onchange="window.location.href=this.value">{items}</select></label>'
    )


def pickers(*selects: str) -> str:
    return f'<div class="pickers">{"".join(s for s in selects if s)}</div>'


# Tables -----------------------------------------------------------------------------------


def _cell(value: object, digits: int) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return '<td class="num">-</td>'
    return f'<td class="num">{value:.{digits}f}</td>'


def _row_shape(row: object) -> Shape:
    return Shape(int(row.B), int(row.T), int(row.NH), int(row.NH_KV), int(row.HD))


def overview_table(table: pd.DataFrame, compare: bool = True, l2: str = L2_COLD) -> str:
    """The winners, one row per GPU, shape and dtype, each with links to its shape page,
    its /best recipe (in L2 state `l2`), its kernel source and (with `compare`) the shape on
    every GPU."""
    if table.empty:
        return '<p class="note">No results loaded yet.</p>'
    rows = []
    for row in table.itertuples(index=False):
        shape = _row_shape(row)
        stale = "" if row.source_current else ' <span class="note">(measured with an older source)</span>'
        rows.append(
            f"<tr><td>{link(row.gpu, bandwidth_url(row.gpu))}</td>"
            f"<td>{link(row.shape, shape_url(row.gpu, shape, row.dtype))}</td>"
            f"<td>{e(row.dtype)}</td><td><code>{e(row.config_key)}</code>{stale}</td>"
            f"{_cell(row.time_ms, 4)}{_cell(row.gbps, 0)}"
            f"{_cell(row.pct_of_peak, 1)}{_cell(row.ratio_to_copy, 3)}"
            f"{_cell(row.speedup_vs_baseline, 2)}<td class='num'>{int(row.trials)}</td>"
            f"<td>{winner_links(row.gpu, shape, row.dtype, row.source_hash, l2)}</td>"
            + (f"<td>{link('all GPUs', gpus_url(shape, row.dtype))}</td>" if compare else "")
            + "</tr>"
        )
    head = (
        "<tr><th>GPU</th><th>shape</th><th>dtype</th><th>winner</th><th>ms</th><th>GB/s</th>"
        '<th title="of the peak DRAM bandwidth of the GPU (data sheet)">% of peak</th><th>time / copy</th>'
        "<th>speed-up vs llm.c</th><th>trials</th><th>kernel</th>"
        + ("<th></th>" if compare else "")
        + "</tr>"
    )
    return f'<table class="winners"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def bandwidth_table(table: pd.DataFrame, peak_gbps: float | None) -> str:
    if table.empty:
        return ""
    rows = []
    for row in table.itertuples(index=False):
        shape = _row_shape(row)
        of_peak = _cell(100 * row.gbps / peak_gbps, 1) if peak_gbps else ""
        rows.append(
            f"<tr><td>{link(row.short_shape, shape_url(row.gpu, shape, row.dtype))}</td>"
            f"<td>{e(row.dtype)}</td>"
            f"{_cell(row.bytes_moved / 1e6, 1)}{_cell(row.gbps, 0)}{_cell(row.copy_gbps, 0)}"
            f"{of_peak}{_cell(row.ratio_to_copy, 3)}{_cell(row.ratio_to_empty_launch, 2)}"
            f"{_cell(row.baseline_gbps, 0)}"
            f"<td><code>{e(row.config_key)}</code></td>"
            f"<td>{winner_links(row.gpu, shape, row.dtype, row.source_hash)}</td></tr>"
        )
    peak_head = "<th>% of peak</th>" if peak_gbps else ""
    head = (
        '<tr><th title="B×T NH/NH_KV/HD">shape</th><th>dtype</th><th>MB moved</th><th>winner GB/s</th>'
        f"<th>copy GB/s</th>{peak_head}<th>time / copy</th>"
        '<th title="time over an empty kernel launch of the same run: below ~32 MB the copy carries a '
        'fixed cost of its own">time / empty launch</th><th>llm.c GB/s</th><th>winner</th>'
        "<th>kernel</th></tr>"
    )
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def nearest_table(table: pd.DataFrame, gpu: str) -> str:
    if table.empty:
        return ""
    rows = []
    for row in table.itertuples(index=False):
        shape = _row_shape(row)
        css = ' class="serves"' if row.serves else ""
        rows.append(
            f"<tr{css}><td>{link(str(shape), shape_url(gpu, shape, row.dtype))}</td><td>{e(row.dtype)}</td>"
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


def served_summary(served: Mapping[str, Any], shape: Shape, dtype: str) -> str:
    """What GET /best serves for a shape nobody tuned on this GPU."""
    tuned = served["tuned_shape"]
    assert isinstance(tuned, Shape)
    gpu = str(served["gpu"])
    ratio = served["ratio_to_copy"]
    gbps = served["gbps"]
    measured = f"{served['time_ms']:.4f} ms"
    if isinstance(ratio, float):
        measured += f", {ratio:.3f}x the copy"
    if isinstance(gbps, float):
        measured += f", {gbps:.0f} GB/s"
    tuned_dtype = str(served["tuned_dtype"])
    tuned_page = shape_url(str(served["measured_gpu"]), tuned, tuned_dtype)
    rank = int(served["rank"])
    which = "" if rank == 0 else f", its configuration number {rank + 1}"
    source = winner_links(gpu, shape, dtype, served["source_hash"])
    return (
        '<div class="summary served">'
        f"<p><b>Not tuned on {e(gpu)}.</b> GET /best serves the configuration of the nearest tuned shape:</p>"
        f"<p><code>{e(served['config_key'])}</code>, launched for this shape as grid {served['grid']} "
        f"x block {served['block']} ({source})</p>"
        f"<p>It comes from {link(f'{tuned} {tuned_dtype}', tuned_page)} (tier {served['tier']}, "
        f"distance {float(served['distance']):.2f}{which}), where it measured {e(measured)}.</p>"
        f"{rule_quality_note(served.get('rule_quality'), str(served['measured_gpu']))}</div>"
    )


def rule_quality_note(quality: TierQuality | None, gpu: str) -> str:
    """How answers of the served tier have done, leave-one-out (results.leave_one_out's
    TierQuality, as GET /best gives it), in one paragraph; empty without it."""
    if quality is None:
        return ""
    every = link("every tier", rule_quality_url(gpu))
    if quality.median_slowdown is None:
        return f'<p class="note">How this rule has done: {e(quality.reason)} ({every}).</p>'
    return (
        f'<p class="note">How this rule has done: of the tuned shapes of {e(gpu)} that, left out, '
        f"were answered from tier {quality.tier} ({quality.held_out}), {quality.judged} had measured "
        f"the configuration served to them: it ran a median {quality.median_slowdown:.3f}x their "
        f"own best (p90 {quality.p90_slowdown:.3f}x, worst {quality.worst_slowdown:.3f}x; {every}).</p>"
    )


def not_found(title: str, message: str, links: Sequence[tuple[str, str]]) -> str:
    items = "".join(f"<li>{link(text, href)}</li>" for text, href in links)
    return page(title, f"<p>{e(message)}</p><ul>{items}</ul>")
