"""Dashboards: DataFrames built by pure functions (data.py), drawn with plotly (draw.py),
wrapped in HTML pages (pages.py)."""
