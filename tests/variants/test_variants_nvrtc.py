"""Offline compilation with NVRTC (no GPU): every valid configuration compiles without
spills, and the PTX shows the loads and stores each family promises."""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

import pytest

from tuner.cli.check import CHECK_SHAPES, main_check
from variants import DTYPES, FAMILIES, Config, Shape
from variants.compile_cache import SHIPPED_REPORTS, ReportCache
from variants.family import Family, Launch

nvrtc = pytest.importorskip("variants.nvrtc")
try:
    nvrtc.nvrtc_version()
except nvrtc.NvrtcUnavailable as exc:  # pragma: no cover - CI installs the nvrtc extra
    pytest.skip(str(exc), allow_module_level=True)

SEED = Shape(8, 1024, 32, 8, 128)
# vec and gather instantiate the same kernels at the seed shape and at this one (their template
# arguments depend on a shape only through its index type).
SMALL = Shape(4, 512, 32, 32, 64)


def space_work(family_name: str, shapes: list[Shape]) -> list[tuple[Family, str]]:
    family = FAMILIES[family_name]
    return [
        (family, family.name_expression(shape, dtype, config))
        for shape in shapes
        for dtype in DTYPES.values()
        for config in family.space()
        if family.rejection(shape, dtype, config) is None
    ]


# Compiling the whole space from nothing takes 2 x 29k kernels at ~45 ms of CPU each, over 20
# minutes on two cores: the shipped reports (variants/data) seed the test's cache.
SPOT_CHECKS = 24  # kernels an arch compiled afresh, drawn anew each run


def whole_space(arch: str) -> list[tuple[Family, str]]:
    from variants import OPS

    return [
        (family, family.name_expression(shape, dtype, config))
        for op in OPS.values()
        for family in op.families.values()
        for shape in CHECK_SHAPES
        for dtype in DTYPES.values()
        for config in family.space()
        if family.rejection(shape, dtype, config) is None
    ]


@pytest.mark.long
@pytest.mark.timeout(2400)  # cold (a template edited since the shipped reports), on two busy cores
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_whole_space_compiles_without_spills(
    arch: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`python -m tuner check --arch ...` over every configuration of every op, from a report
    cache seeded with the shipped reports: a kernel whose template, options or toolchain
    changed since misses it and compiles here. Then a fresh sample, compiled with no cache at
    all, must say exactly what the shipped reports say, so they cannot drift from NVRTC."""
    cache = ReportCache(tmp_path / "reports.sqlite3")
    cache.import_file(SHIPPED_REPORTS)
    monkeypatch.setenv("REPKV_NVRTC_CACHE", str(cache.path))
    args = argparse.Namespace(arch=[arch], shape=None, dtype=None, family=None, op=None)
    assert main_check(args) == 0
    out = capsys.readouterr().out
    assert f"{len(CHECK_SHAPES)} shapes" in out
    assert "0 failed, 0 spilled" in out

    work = list({e: (f, e) for f, e in whole_space(arch)}.values())
    seed = random.randrange(2**32)
    sample = random.Random(seed).sample(work, SPOT_CHECKS)
    fresh = nvrtc.compile_all(sample, arch=arch, cache=False)
    kept = cache.get_many(nvrtc.report_keys(sample, arch))
    for report, key in zip(fresh, nvrtc.report_keys(sample, arch), strict=True):
        assert key in kept, f"seed {seed}: {report.expression} has no report"
        assert nvrtc.cached_fields(report) == kept[key], f"seed {seed}: {report.expression}"


def test_the_shipped_reports_cover_the_whole_space_with_this_toolchain() -> None:
    """A template edited without `check --save-reports` would make CI compile it cold."""
    shipped = ReportCache.read_file(SHIPPED_REPORTS)
    for arch in ("sm_90", "sm_80"):
        keys = nvrtc.report_keys(whole_space(arch), arch)
        missing = [k for k in keys if k not in shipped]
        if len(missing) == len(keys):
            pytest.skip(f"the shipped reports were made with another NVRTC than {nvrtc.nvrtc_version()}")
        assert not missing, (
            f"{len(missing)} of {len(keys)} {arch} kernels have no shipped report: run `python -m tuner "
            f"check --arch sm_90,sm_80 --save-reports {SHIPPED_REPORTS.relative_to(Path.cwd())}`"
        )


def test_no_kernel_is_planned_twice_and_programs_hold_many() -> None:
    work = space_work("vec", [SEED, SMALL]) + space_work("gather", [SEED, SMALL])
    distinct = list(dict.fromkeys(e for _, e in work))
    # both shapes give each configuration the same code, as do configurations apart in `block`
    assert {e for _, e in space_work("vec", [SEED])} == {e for _, e in space_work("vec", [SMALL])}
    assert len(work) > 4 * len(distinct)
    programs = nvrtc.plan_programs(work, chunk=16)
    planned = [e for p in programs for e in p.expressions]
    assert planned == distinct
    assert all(len(p.expressions) <= 16 for p in programs)
    assert next(len(p.expressions) for p in programs if p.name == "vec") == 16
    assert all(p.expressions[0].startswith(f"repkv_{p.name}<") for p in programs)

    class Fast(type(FAMILIES["vec"])):
        compile_options = ("-std=c++17", "--use_fast_math")

    fast = Fast()
    twice = [*work[:3], *((fast, e) for _, e in work[:3])]
    # the same expression under other options is another kernel: a program of its own
    assert [p.options for p in nvrtc.plan_programs(twice)] == [fast.compile_options[:1], fast.compile_options]


def test_compile_all_compiles_each_kernel_once_in_programs_over_processes() -> None:
    work = space_work("gather", [SEED, SMALL, Shape(2, 65536, 64, 8, 128)])
    distinct = list(dict.fromkeys(e for _, e in work))
    assert len(work) > len(distinct) > 16
    programs: list[int] = []
    reports = nvrtc.compile_all(work, workers=2, chunk=8, on_done=programs.append, cache=False)
    assert [r.expression for r in reports] == distinct
    # one call per program of at most 8 kernels, each kernel in exactly one
    assert sum(programs) == len(distinct) and max(programs) == 8
    assert len(programs) == -(-len(distinct) // 8)
    assert all(r.ok and r.registers > 0 and not r.cached for r in reports)
    # what the worker processes report is what one program compiled here reports
    here = nvrtc.compile_expressions(FAMILIES["gather"], distinct)
    assert [(r.expression, r.registers, r.spills) for r in reports] == [
        (r.expression, r.registers, r.spills) for r in here
    ]


def test_a_second_compile_reads_the_report_cache_and_compiles_nothing(monkeypatch, tmp_path: Path) -> None:
    work = space_work("naive", [SEED])
    cache = ReportCache(tmp_path / "reports.sqlite3")
    first = nvrtc.compile_all(work, cache=cache)
    assert first and not any(r.cached for r in first)
    compiled: list[nvrtc.Program] = []
    run = nvrtc._run

    def spy(programs, *args):
        compiled.extend(programs)
        return run(programs, *args)

    monkeypatch.setattr(nvrtc, "_run", spy)
    again = nvrtc.compile_all(work, cache=cache)
    assert compiled == [] and all(r.cached for r in again)
    assert [(r.expression, r.ok, r.registers) for r in again] == [
        (r.expression, r.ok, r.registers) for r in first
    ]
    # another arch is another key: compiled, not read
    nvrtc.compile_all(work, arch="sm_80", cache=cache)
    assert [e for p in compiled for e in p.expressions] == list(dict.fromkeys(e for _, e in work))


def test_check_reads_the_report_cache_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REPKV_NVRTC_CACHE", str(tmp_path / "reports.sqlite3"))
    monkeypatch.setattr(ReportCache, "seed", lambda self, path=SHIPPED_REPORTS: 0)  # an unseeded cache
    shape = "B=8,T=1024,NH=32,NH_KV=8,HD=128"

    def check(**flags) -> str:
        args = argparse.Namespace(
            arch=["sm_90"], shape=[shape], dtype=None, family=["naive"], op=["repkv_backward"], **flags
        )
        assert main_check(args) == 0
        return capsys.readouterr().out

    assert "from the report cache" not in check()
    again = check()
    assert "sm_90: 3 kernels in" in again and "(3 from the report cache)" in again
    assert "from the report cache" not in check(no_cache=True)


def global_memory_ops(family_name: str, dtype: str, config: Config, shape: Shape = SEED) -> set[str]:
    family = FAMILIES[family_name]
    expression = family.name_expression(shape, DTYPES[dtype], config)
    (report,) = nvrtc.compile_expressions(family, [expression], keep_ptx=True)
    assert report.ok and report.ptx, report.error
    return set(re.findall(r"\b(?:ld|st)\.global[.\w]*", report.ptx))


def access_bytes(op: str) -> int:
    """Bytes one PTX global access moves: ld.global.cs.v4.u32 -> 16."""
    lanes = re.search(r"\.v(\d)\.", op)
    bits = re.search(r"(\d+)$", op)
    assert bits, op
    return (int(lanes.group(1)) if lanes else 1) * int(bits.group(1)) // 8


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(
    ("load", "store", "ld", "st"),
    [
        ("plain", "plain", "ld.global.v4", "st.global.v4"),
        ("ldg", "stcs", "ld.global.nc.v4", "st.global.cs.v4"),
        ("ldcs", "plain", "ld.global.cs.v4", "st.global.v4"),
    ],
)
@pytest.mark.parametrize(
    "config",
    [
        Config.of("vec", block=256, vec_bytes=16, load="x", store="x"),
        Config.of("warp_per_head", warps=4, vec_bytes=16, load="x", store="x"),
        Config.of("split", block=256, vec_bytes=16, items=4, load="x", store="x"),
    ],
    ids=lambda c: c.family,
)
def test_vector_families_issue_128_bit_loads_and_stores(dtype, load, store, ld, st, config: Config) -> None:
    config = Config.of(config.family, **{**config.values, "load": load, "store": store})
    ops = global_memory_ops(config.family, dtype, config)
    loads = {op for op in ops if op.startswith("ld.")}
    stores = {op for op in ops if op.startswith("st.")}
    assert loads and all(op.startswith(ld) for op in loads), ops
    assert stores and all(op.startswith(st) for op in stores), ops
    assert {access_bytes(op) for op in ops} == {16}, ops


def test_narrower_words_and_the_scalar_baseline() -> None:
    ops = global_memory_ops(
        "vec", "bf16", Config.of("vec", block=128, vec_bytes=8, load="plain", store="plain")
    )
    assert ops and {access_bytes(op) for op in ops} == {8}, ops  # v2.u32 or v4.u16
    naive = global_memory_ops("naive", "fp32", Config.of("naive", block=128))
    assert {op for op in naive if op.startswith("ld.")} == {"ld.global.cs.f32"}  # llm.c's __ldcs


class Broken(Family):
    name = "broken"
    doc = "a template that does not compile"
    params = ()

    def __init__(self, path: Path):
        self.path = path

    @property
    def template_path(self) -> Path:
        return self.path

    def template_args(self, shape, dtype, p):
        return [dtype.ctype]

    def launch(self, shape, dtype, p, sm_count):
        return Launch(1, 32)


def test_compile_failures_are_reported_one_by_one(tmp_path: Path) -> None:
    cu = tmp_path / "broken.cu"
    cu.write_text(
        "template <typename T> __global__ void repkv_broken(T* a) {"
        ' static_assert(sizeof(T) != 2, "planted: no 16-bit types"); a[0] = a[1]; }\n'
    )
    family = Broken(cu)
    reports = nvrtc.compile_expressions(family, ["repkv_broken<float>", "repkv_broken<__half>"])
    by_expr = {r.expression: r for r in reports}
    assert by_expr["repkv_broken<float>"].ok
    assert not by_expr["repkv_broken<__half>"].ok
    assert "planted: no 16-bit types" in by_expr["repkv_broken<__half>"].error


def test_ptxas_log_parsing() -> None:
    log = (
        "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z3fooPf\n"
        "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 0 barriers\n"
    )
    assert nvrtc.parse_ptxas_log(log) == {
        "_Z3fooPf": {"registers": 40, "stack": 8, "spill_store": 4, "spill_load": 4}
    }


def test_check_seeds_an_empty_cache_with_the_shipped_reports_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`python -m tuner check` on a fresh machine: the reports shipped in the package fill the
    user's cache, so with the toolchain they were made with nothing compiles again."""
    monkeypatch.setenv("REPKV_NVRTC_CACHE", str(tmp_path / "reports.sqlite3"))
    args = argparse.Namespace(arch=["sm_90"], shape=None, dtype=None, family=["vec"], op=["repkv_forward"])
    assert main_check(args) == 0
    out = capsys.readouterr().out
    assert re.search(r"the report cache took the \d+ reports shipped with the package", out)
    kernels = int(re.search(r"sm_90: (\d+) kernels in", out).group(1))
    if f"({kernels} from the report cache)" not in out:
        pytest.skip(f"the shipped reports were made with another NVRTC than {nvrtc.nvrtc_version()}")
    assert main_check(args) == 0  # the second time, nothing to import
    assert "shipped with the package" not in capsys.readouterr().out
    assert ReportCache(tmp_path / "reports.sqlite3").seed() == 0
