"""What the dashboards' data tests share (test_dashboard_data_*.py)."""

from __future__ import annotations

import pandas as pd
from trial_rows import h100_rows, other_rows

BF16 = "bf16"


def frame() -> pd.DataFrame:
    return pd.DataFrame(h100_rows() + other_rows())
