"""The README's CuPy example, run as written against a live service on the bundled results."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from live_service import running_service

pytestmark = pytest.mark.gpu

README = Path(__file__).resolve().parents[2] / "README.md"
BUNDLED = Path(__file__).resolve().parents[2] / "results" / "data"


def readme_example(name: str) -> str:
    text = README.read_text()
    found = re.search(rf"<!-- readme-example: {name} -->\n```python\n(.*?)```", text, re.S)
    assert found, f"no example {name!r} in the README"
    return found.group(1)


def test_the_cupy_example_launches_the_served_kernel() -> None:
    code = readme_example("cupy")
    with running_service(BUNDLED) as url:
        namespace: dict = {}
        exec(compile(code.replace("http://127.0.0.1:8000", url), "README.md", "exec"), namespace)
    cupy, numpy = namespace["cupy"], namespace["numpy"]
    B, T, NH, NH_KV, HD = (namespace[n] for n in ("B", "T", "NH", "NH_KV", "HD"))
    # the K/V heads too: bf16 bits -> float32, summed in float64, against the kernel's rounding
    x = (namespace["dout"].astype(cupy.uint32) << 16).view(cupy.float32).astype(cupy.float64)
    got = (namespace["dinp"].astype(cupy.uint32) << 16).view(cupy.float32)
    kv = x[:, :, 1:].reshape(B, T, 2, NH_KV, NH // NH_KV, HD).sum(4).reshape(B, T, 2 * NH_KV, HD)
    numpy.testing.assert_allclose(cupy.asnumpy(got[:, :, NH:]), cupy.asnumpy(kv), rtol=1.6e-2, atol=1e-3)
