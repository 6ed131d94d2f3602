from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from service_client import REPO


def test_the_service_never_imports_cupy(store_dir: Path) -> None:
    code = f"""
import json, sys
import service.cli
from fastapi.testclient import TestClient
from service.api.app import create_app
from service.settings import Settings
from results.leave_one_out import leave_one_out
from service.dashboards import data, draw, pages
app = create_app(Settings(results_dir={str(store_dir)!r}))
with TestClient(app) as client:
    app.state.store.wait_ready(30)
    statuses = [client.get(u).status_code for u in
                ["/best?B=8&T=1024", "/dashboards", "/dashboards/shape?gpu=h100&B=8&T=1024", "/results"]]
print(json.dumps({{"statuses": statuses, "cupy": "cupy" in sys.modules}}))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"statuses": [200, 200, 200, 200], "cupy": False}
