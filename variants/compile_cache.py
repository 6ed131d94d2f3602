"""What NVRTC said about each kernel (compiled or not, its log, registers, stack, spills), kept
on disk so that no kernel is compiled twice with the same toolchain, arch, options and source.

A key hashes all of these with the name expression, so an edited template, another NVRTC or
other headers miss the cache and compile again. The cache is one SQLite file, shared safely by
concurrent processes: `$REPKV_NVRTC_CACHE` names it (`off` turns the cache off), by default
`$XDG_CACHE_HOME/repkv-tune/nvrtc-reports.sqlite3` (`~/.cache/...`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

ENV = "REPKV_NVRTC_CACHE"
# Every kernel's report for sm_90 and sm_80 with the toolchain `./test.sh` pins, as `python -m
# tuner check --arch sm_90,sm_80 --save-reports variants/data/nvrtc-reports.parquet` wrote them
# (delete the file first): a cache seeded with it checks the space in seconds with that
# toolchain; with any other, no key matches and every kernel compiles.
SHIPPED_REPORTS = Path(__file__).resolve().parent / "data" / "nvrtc-reports.parquet"
OFF = ("off", "0", "no", "false", "")
SCHEMA = "v1"  # part of every key: a change to what is kept starts afresh


def cache_path() -> Path | None:
    """Where the user's cache lives, or None when `$REPKV_NVRTC_CACHE` turns it off."""
    given = os.environ.get(ENV)
    if given is not None:
        return None if given.strip().lower() in OFF else Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "repkv-tune" / "nvrtc-reports.sqlite3"


def default_cache() -> ReportCache | None:
    path = cache_path()
    return None if path is None else ReportCache(path)


class ReportCache:
    """Reports by key; a cache that cannot be opened or written is skipped, never an error."""

    def __init__(self, path: Path):
        self.path = path

    @staticmethod
    def program_digest(toolchain: str, arch: str, options: Iterable[str], source: str) -> str:
        parts = [SCHEMA, toolchain, arch, "\0".join(options), source]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    @staticmethod
    def key(program_digest: str, expression: str) -> str:
        return hashlib.sha256(f"{program_digest}\x1f{expression}".encode()).hexdigest()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60)
        db.execute("CREATE TABLE IF NOT EXISTS reports (key TEXT PRIMARY KEY, report TEXT NOT NULL)")
        return db

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        try:
            db = self._connect()
        except (OSError, sqlite3.Error):
            return found
        try:
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                marks = ",".join("?" * len(part))
                query = f"SELECT key, report FROM reports WHERE key IN ({marks})"
                for key, report in db.execute(query, part):
                    found[key] = json.loads(report)
        except (sqlite3.Error, ValueError):
            return {}
        finally:
            db.close()
        return found

    def put_many(self, reports: Mapping[str, Mapping[str, Any]]) -> None:
        if not reports:
            return
        rows = [(key, json.dumps(dict(report), sort_keys=True)) for key, report in reports.items()]
        try:
            db = self._connect()
        except (OSError, sqlite3.Error):
            return
        try:
            with db:
                db.executemany("INSERT OR REPLACE INTO reports (key, report) VALUES (?, ?)", rows)
        except sqlite3.Error:
            pass
        finally:
            db.close()

    @staticmethod
    def read_file(path: Path) -> dict[str, dict[str, Any]]:
        """Reports kept in a parquet file (`write_file`)."""
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=["key", "report"])
        return {
            k: json.loads(r)
            for k, r in zip(table["key"].to_pylist(), table["report"].to_pylist(), strict=True)
        }

    @staticmethod
    def table(reports: Mapping[str, Mapping[str, Any]]) -> pa.Table:
        """Reports as a table of (key, report JSON), sorted by key: what a report file holds
        (`check --save-reports` writes it, atomically)."""
        import pyarrow as pa

        keys = sorted(reports)
        return pa.table({"key": keys, "report": [json.dumps(dict(reports[k]), sort_keys=True) for k in keys]})

    def import_file(self, path: Path) -> int:
        """Put a report file's reports into this cache; how many."""
        reports = self.read_file(path)
        self.put_many(reports)
        return len(reports)

    def seed(self, path: Path = SHIPPED_REPORTS) -> int:
        """Import a report file once per content (a marker key remembers it); how many reports
        it brought, 0 when it was imported before or cannot be read."""
        try:
            marker = "imported:" + hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return 0
        if self.get_many([marker]):
            return 0
        try:
            count = self.import_file(path)
        except (OSError, ValueError):
            return 0
        self.put_many({marker: {}})
        return count
