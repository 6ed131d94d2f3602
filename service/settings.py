"""Service settings: defaults, then REPKV_* environment variables, then command-line flags."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from results.store import read_dirs, user_results_dir

LogLevel = Literal["critical", "error", "warning", "info", "debug"]


class Settings(BaseSettings):
    """Every field can be set as REPKV_<NAME> (e.g. REPKV_RESULTS_DIR, REPKV_PORT)."""

    model_config = SettingsConfigDict(env_prefix="REPKV_", extra="ignore", frozen=True)

    results_dir: Path = Field(
        default_factory=user_results_dir,
        description="directory of trial parquet files, read only (default: where the tuner writes)",
    )
    bundled: bool = Field(True, description="also serve the results bundled with the package")
    host: str = Field("127.0.0.1", min_length=1, max_length=255, description="address to bind")
    port: int = Field(8000, ge=1, le=65535)
    reload_interval: float = Field(
        5.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="seconds between checks of the results directory for changes",
    )
    log_level: LogLevel = "info"
    access_log: bool = True

    @field_validator("results_dir")
    @classmethod
    def _expand_user(cls, value: Path) -> Path:
        """~ read as the tuner reads it (`results.store.user_results_dir`): both find one directory."""
        return value.expanduser()

    def read_dirs(self) -> list[Path]:
        """results_dir, then the bundled results unless turned off (results.store.read_dirs)."""
        return read_dirs(self.results_dir, bundled=self.bundled)
