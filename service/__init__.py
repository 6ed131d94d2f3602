"""The results service: a FastAPI app over the parquet results store.

`GET /best` answers which configuration to compile and launch for a shape; the other
routes list what was tuned, export trial rows and draw dashboards. It runs without a GPU
and never imports cupy.
"""
