"""The packaging tests share one wheel, built once per session, and one install of it with the
`tuner` extra (each test that uses it gets its own working and user data directories)."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheel_install import Install, build_wheel, fresh_install


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def tuner_install(tmp_path_factory: pytest.TempPathFactory, built_wheel: Path) -> Install:
    installed = fresh_install(tmp_path_factory.mktemp("tuner-install"), built_wheel)
    installed.pip_install(f"{built_wheel}[tuner]")
    return installed
