"""HTML pages around plotly figures. Figures travel as JSON in <script type="application/json">
(with '<' escaped), drawn by plotly.js served from this app (/static/plotly.min.js). The links
are dashboards.urls', the tables dashboards.tables' (both re-exported here)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import plotly.graph_objects as go

import variants
from service.dashboards.tables import (  # noqa: F401  (re-exported)
    bandwidth_table,
    nearest_table,
    overview_table,
    rule_quality_note,
    served_by_gpu_table,
    served_summary,
)
from service.dashboards.urls import (  # noqa: F401  (re-exported)
    bandwidth_url,
    best_url,
    e,
    gpus_url,
    kernel_url,
    link,
    op_query,
    overview_url,
    rule_quality_url,
    shape_query,
    shape_url,
    winner_links,
)

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


def page(
    title: str, body: str, figures: Sequence[go.Figure] = (), after: str = "", op: str | None = None
) -> str:
    """A page: `body`, then the figures, then `after` (e.g. a long table); the navigation
    links stay on op `op`."""
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
<body><nav><a href="{e(overview_url(op=op))}">Overview</a><a href="{e(bandwidth_url(op=op))}">Bandwidth</a>
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


def op_picker(op: str, url_of: Callable[[str], str], with_rows: Collection[str]) -> str:
    """The op select: every op of variants.OPS, each loading `url_of(op)`; those without rows
    in `with_rows` are marked (no results)."""
    options = [
        (name if name in with_rows else f"{name} (no results)", url_of(name), name == op)
        for name in variants.OPS
    ]
    return picker("Op", options)


def untuned_op(op: str, unread: str = "") -> str:
    """The line of a page whose op has no rows: the command that tunes it, then `unread` (the
    results files that could not be read, or nothing), with a link to the status page."""
    note = f'<p class="unread">{e(unread)}: see {link("Status", "/readyz")}.</p>'
    return (
        f'<p class="untuned">No results of {e(op)} yet: tune it with '
        f"<code>python -m tuner --op {e(op)}</code>.</p>" + (note if unread else "")
    )


def not_found(title: str, message: str, links: Sequence[tuple[str, str]], op: str | None = None) -> str:
    items = "".join(f"<li>{link(text, href)}</li>" for text, href in links)
    return page(title, f"<p>{e(message)}</p><ul>{items}</ul>", op=op)
