"""Shared fixtures. Tests marked `gpu` run only where CuPy sees a CUDA device."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(item.get_closest_marker("gpu") for item in items) and not gpu_available():
        skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)
