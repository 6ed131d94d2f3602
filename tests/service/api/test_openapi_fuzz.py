"""The API fuzzed against its own OpenAPI schema: no 5xx, every response as documented."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from trial_rows import h100_rows, other_rows

from results.store import write_table
from service.api.app import create_app
from service.live_store import ResultsStore
from service.settings import Settings

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def build_app() -> FastAPI:
    """An app over a store written by this module (synthetic rows, plus one corrupt file)."""
    directory = Path(tempfile.mkdtemp(prefix="repkv-fuzz-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    write_table(h100_rows(), directory, "synthetic-h100")
    write_table(other_rows(), directory, "synthetic-others")
    (directory / "corrupt.parquet").write_bytes(b"not parquet")
    store = ResultsStore(directory)
    store.refresh()
    return create_app(Settings(results_dir=directory), store)


# Built at collection: schemathesis parametrizes from a schema object.
schema = schemathesis.openapi.from_asgi("/openapi.json", build_app())


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=CHECKS)
