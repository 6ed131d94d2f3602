"""The packages hold code and the bundled store, never the record of benchmark runs: the logs,
tables and parquet of the H200 runs live in docs/runs, outside every package, so neither the
wheel nor an editable install (`pip install -e .`, as run.sh does) carries them."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("variants", "tuner", "service", "results", "repkv_tune")
RECORDS = (".log", ".txt", ".md", ".json", ".csv")


def package_files() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in (REPO / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]


def test_no_benchmark_record_lives_in_a_package() -> None:
    files = package_files()
    assert files
    assert not [str(p.relative_to(REPO)) for p in files if p.suffix in RECORDS]
    bundled = REPO / "results" / "data"
    reports = REPO / "variants" / "data" / "nvrtc-reports.parquet"  # what NVRTC said, not a timing
    strays = [p for p in files if p.suffix == ".parquet" and not p.is_relative_to(bundled) and p != reports]
    assert not [str(p.relative_to(REPO)) for p in strays]  # else parquet ships only as the bundled store
    assert not (REPO / "results" / "benchmarks").exists()
    assert len(list((REPO / "docs" / "runs").glob("h200*"))) >= 115  # moved, not deleted
