"""Readers of the dashboards' HTML for test_dashboard_pages*.py (and, through it, test_dashboard_ops)."""

from __future__ import annotations

import base64
import json
import math
import re

import numpy as np

SHAPE = {"B": 8, "T": 1024, "NH": 32, "NH_KV": 8, "HD": 128}


def specs(html: str) -> list[dict]:
    found = re.findall(r'<script type="application/json" id="spec-\d+">(.*?)</script>', html, re.S)
    return [json.loads(text) for text in found]


def values(array: object) -> list:
    """A trace's array as plotly's JSON carries it: a list, or typed bytes in base64."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"])).tolist()
    return list(array)


def hrefs(html: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'href="([^"]+)"', html)]


def picker_options(html: str, name: str) -> list[tuple[str, str, bool]]:
    """(text, url, selected) of one picker's options."""
    block = re.search(rf'<select name="{name}".*?</select>', html, re.S)
    assert block, f"no {name} picker"
    options = re.findall(r'<option value="([^"]*)"( selected)?>([^<]*)</option>', block.group(0))
    return [(text, value.replace("&amp;", "&"), bool(sel)) for value, sel, text in options]


def labelled_lines(figure: dict) -> list[tuple[float, float]]:
    """(line y, label y) of each reference line, in the axis' own units (log10 on log axes)."""
    layout = figure["layout"]
    log = layout.get("yaxis", {}).get("type") == "log"
    lines = {s["name"]: s["y0"] for s in layout.get("shapes", []) if s.get("name")}
    return [
        (math.log10(lines[a["name"]]) if log else lines[a["name"]], a["y"])
        for a in layout.get("annotations", [])
        if a.get("name") in lines
    ]
