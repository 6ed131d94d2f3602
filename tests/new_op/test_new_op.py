"""A new op arrives as data: this file declares one (a plain copy) with its descriptor and one
template beside it, registers it, and runs it through a replayed study, the store, `/best`,
`/results`, the dashboards and the llm.c header export, with no other file of the project
edited."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from toolchain import nvcc_path
from trial_rows import trial

import variants
from results.header import export_header
from results.header_render import render_header
from results.index import build_index
from results.store import load_results, write_table
from service.api.app import create_app
from service.live_store import ResultsStore
from service.settings import Settings
from tuner.run.pipeline import tune
from tuner.run.request import TuneRequest
from variants import Config, DType, Family, GridTerm, Launch, Op, Operand, Param, Shape
from variants.family import BLOCK_SIZES, ceil_div

HERE = Path(__file__).resolve().parent
SHAPE = Shape(2, 256, 16, 4, 64)


class CopyNaive(Family):
    name = "naive"
    doc = "one thread per element"
    params = (Param("block", BLOCK_SIZES, "threads per block"),)
    layout_free = True  # it reads the head layout at run time: the header's kernel for any layout
    kernel_prefix = "copy_op"
    template_dir = HERE

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        return [dtype.ctype]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(ceil_div(shape.tokens * shape.heads_in * shape.HD, p["block"]), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, shape.heads_in * shape.HD, p["block"]),)


def _reference(inputs: Sequence[Any], shape: Shape, positions: Any, xp: Any) -> Any:
    return inputs[0]


PACKED = Operand("inp", "(B, T, NH + 2*NH_KV, HD)", token_elements=lambda s: s.heads_in * s.HD)
COPY_OP = Op(
    name="copy_op",
    doc="out = inp",
    output=Operand("out", "(B, T, NH + 2*NH_KV, HD)", token_elements=lambda s: s.heads_in * s.HD),
    inputs=(PACKED,),
    families={"naive": CopyNaive()},
    baseline=Config.of("naive", block=128),
    reference=_reference,
    tolerance=lambda dtype, shape, largest: (0.0, 0.0),
)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[Op]:
    monkeypatch.setitem(variants.OPS, COPY_OP.name, COPY_OP)
    yield COPY_OP


def recording(directory: Path) -> Path:
    """A recording of every configuration of the op (synthetic times: block 256 fastest)."""
    rows = [
        trial("h200", SHAPE, "bf16", "naive", {"block": b}, 0.010 * (1 + abs(b - 256) / 256), op="copy_op")
        for b in BLOCK_SIZES
    ]
    write_table(rows, directory / "h200", "recording")
    return directory


def test_a_new_op_runs_through_the_study_the_store_the_service_and_the_header(
    registered: Op, tmp_path: Path
) -> None:
    recorded = recording(tmp_path / "recording")
    out = tmp_path / "results"
    request = TuneRequest(
        op="copy_op",
        shapes=(SHAPE,),
        dtypes=("bf16",),
        trials=4,
        replay_dir=recorded,
        results_dir=out,
        gpu="h200",
        storage="memory",
        seed=3,
        progress=False,
    )
    result = tune(request)
    assert result.rows == 4
    frame, _ = load_results([out])
    assert set(frame["op"]) == {"copy_op"} and set(frame["family"]) == {"naive"}
    assert frame["name_expression"].eq("copy_op_naive<__nv_bfloat16>").all()

    store = ResultsStore(out, interval=30.0)
    app = create_app(Settings(results_dir=out, reload_interval=30.0), store)
    with TestClient(app) as client:
        assert client.app.state.store.wait_ready(30)
        best = client.get("/best", params={**SHAPE.as_dict(), "op": "copy_op", "gpu": "h200"})
        assert best.status_code == 200, best.text
        kernel = best.json()["answers"][0]["kernel"]
        assert kernel["name_expression"] == "copy_op_naive<__nv_bfloat16>"
        assert kernel["kernel_arguments"] == "(T* out, const T* inp, int B, int T, int NH, int NH_KV, int HD)"
        rows = client.get("/results", params={"op": "copy_op", "format": "json"})
        assert rows.status_code == 200 and {r["op"] for r in rows.json()["rows"]} == {"copy_op"}
        page = client.get("/dashboards", params={"op": "copy_op"})
        assert page.status_code == 200 and "copy_op" in page.text
        assert client.get("/best", params={**SHAPE.as_dict(), "op": "other"}).status_code == 422

    export = export_header(build_index(frame), "h200")
    text = render_header(export)
    assert "inline void copy_op(" in text and "copy_op_naive<" in text
    table = json.loads(json.dumps(export.tables["copy_op"].rows[0].__dict__, default=str))
    assert table["tokens"] == SHAPE.tokens


def test_the_new_ops_header_compiles_with_nvcc(registered: Op, tmp_path: Path) -> None:
    nvcc = nvcc_path()
    if nvcc is None:
        pytest.skip("nvcc not installed (pip install nvidia-cuda-nvcc)")
    frame, _ = load_results([recording(tmp_path / "recording")])
    (tmp_path / "repkv_tuned.cuh").write_text(render_header(export_header(build_index(frame), "h200")))
    unit = tmp_path / "unit.cu"
    unit.write_text(
        '#include <cuda_bf16.h>\n#include "repkv_tuned.cuh"\n'
        "void call(__nv_bfloat16* out, const __nv_bfloat16* inp, cudaStream_t s) {\n"
        "    copy_op(out, inp, 2, 256, 16, 4, 64, s);\n}\n"
    )
    build = [
        nvcc,
        "-std=c++17",
        "-arch=sm_90",
        "-c",
        f"-I{tmp_path}",
        str(unit),
        "-o",
        str(tmp_path / "unit.o"),
    ]
    done = subprocess.run(build, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
