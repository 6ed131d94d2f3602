"""HTML pages around plotly figures. Figures travel as JSON in <script type="application/json">
(with '<' escaped), drawn by plotly.js served from this app (/static/plotly.min.js)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
nav a{margin-right:1rem} table{border-collapse:collapse;font-size:.9rem}
td,th{border-bottom:1px solid #ddd;padding:.3rem .6rem;text-align:left} th{background:#f5f5f5}
td.num{text-align:right;font-variant-numeric:tabular-nums} .chart{min-height:380px;margin:1rem 0}
.note{color:#666;font-size:.9rem}
"""


def _json_for_script(text: str) -> str:
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(title: str, body: str, figures: Sequence[go.Figure] = ()) -> str:
    charts = []
    for number, fig in enumerate(figures):
        charts.append(
            f'<div id="chart-{number}" class="chart"></div>'
            f'<script type="application/json" id="spec-{number}">{_json_for_script(fig.to_json())}</script>'
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} - repkv-tune</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><style>{STYLE}</style>
<script src="/static/plotly.min.js"></script></head>
<body><nav><a href="/dashboards">Overview</a><a href="/docs">API</a><a href="/readyz">Status</a></nav>
<h1>{html.escape(title)}</h1>
{body}
{"".join(charts)}
<script>
document.querySelectorAll('script[id^="spec-"]').forEach(function (el) {{
  var spec = JSON.parse(el.textContent);
  Plotly.newPlot(el.id.replace("spec-", "chart-"), spec.data, spec.layout,
                 {{responsive: true, displaylogo: false}});
}});
</script></body></html>"""


def _cell(value: object, digits: int) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return '<td class="num">-</td>'
    return f'<td class="num">{value:.{digits}f}</td>'


def overview_table(table: pd.DataFrame) -> str:
    if table.empty:
        return '<p class="note">No results loaded yet.</p>'
    rows = []
    for row in table.itertuples(index=False):
        shape = {"B": row.B, "T": row.T, "NH": row.NH, "NH_KV": row.NH_KV, "HD": row.HD, "dtype": row.dtype}
        shape_link = "/dashboards/shape?" + urlencode({"gpu": row.gpu, **shape})
        compare_link = "/dashboards/gpus?" + urlencode(shape)
        rows.append(
            f"<tr><td>{html.escape(str(row.gpu))}</td>"
            f'<td><a href="{html.escape(shape_link)}">{html.escape(row.shape)}</a></td>'
            f"<td>{html.escape(row.dtype)}</td><td>{html.escape(row.config_key)}</td>"
            f"{_cell(row.time_ms, 4)}{_cell(row.gbps, 0)}{_cell(row.ratio_to_copy, 3)}"
            f"{_cell(row.speedup_vs_baseline, 2)}<td class='num'>{int(row.trials)}</td>"
            f'<td><a href="{html.escape(compare_link)}">all GPUs</a></td></tr>'
        )
    head = (
        "<tr><th>GPU</th><th>shape</th><th>dtype</th><th>winner</th><th>ms</th><th>GB/s</th>"
        "<th>time / copy</th><th>speed-up vs llm.c</th><th>trials</th><th></th></tr>"
    )
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def not_found(title: str, message: str, links: Sequence[tuple[str, str]]) -> str:
    items = "".join(f'<li><a href="{html.escape(href)}">{html.escape(text)}</a></li>' for text, href in links)
    return page(title, f"<p>{html.escape(message)}</p><ul>{items}</ul>")
