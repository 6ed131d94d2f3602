"""The packaging tests share one wheel, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheel_install import build_wheel


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))
