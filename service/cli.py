"""`python -m service`: serve the results store over HTTP."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from results.store import platform_results_dir
from service.settings import Settings
from variants.errors import RepkvTuneError

SCRIPT = "repkv-serve"  # the installed command ([project.scripts] in pyproject.toml)
MODULE_PROG = "python -m service"


class UsageError(RepkvTuneError):
    pass


def program_name() -> str:
    """The command as it was started, for the usage and error lines: `repkv-serve` when run as the
    installed script, else `python -m service`."""
    started = os.path.basename(sys.argv[0]).removesuffix(".exe") if sys.argv and sys.argv[0] else ""
    return SCRIPT if started == SCRIPT else MODULE_PROG


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def directory(text: str) -> Path:
    """A directory argument: never empty (an empty path would serve the current directory, and
    every parquet file below it)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a directory, not an empty string")
    return Path(text)


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=program_name(),
        description="Serve tuned repkv configurations and dashboards from a results directory. "
        "Every option can also be set as REPKV_<OPTION> (e.g. REPKV_RESULTS_DIR, REPKV_PORT; "
        "--no-bundled and --no-access-log as REPKV_BUNDLED=false and REPKV_ACCESS_LOG=false).",
    )
    p.add_argument(
        "--results-dir",
        type=directory,
        help="directory of trial parquet files (default: where the tuner writes, "
        f"$REPKV_RESULTS_DIR, else {platform_results_dir()}); the bundled results are served beside it",
    )
    p.add_argument(
        "--no-bundled",
        dest="bundled",
        action="store_false",
        default=None,
        help="serve only --results-dir, not the results bundled with the package",
    )
    p.add_argument("--host", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--reload-interval", type=float, help="seconds between checks for new files (default 5)")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        default=None,
        help="do not log every request",
    )
    return p


# What REPKV_<OPTION> would make of the --no-* flags, which Settings does not read: each is
# refused, naming the variable that is read (the results bundled were served all the same).
NEGATED_VARIABLES = {
    "REPKV_NO_BUNDLED": "REPKV_BUNDLED=false",
    "REPKV_NO_ACCESS_LOG": "REPKV_ACCESS_LOG=false",
}


def settings_from(argv: Sequence[str] | None) -> Settings:
    args = parser().parse_args(argv)
    for name, read in NEGATED_VARIABLES.items():
        if name in os.environ:
            raise UsageError(f"{name} is not read: set {read} instead")
    overrides = {k: v for k, v in vars(args).items() if v is not None}
    if "results_dir" not in overrides and os.environ.get("REPKV_RESULTS_DIR", "x").strip() == "":
        overrides["results_dir"] = platform_results_dir()  # empty is unset, as the tuner reads it
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "setting"
        raise UsageError(f"{given_as(field, overrides)}: {first['msg']}") from None
    if settings.results_dir.exists() and not settings.results_dir.is_dir():
        raise UsageError(f"{given_as('results_dir', overrides)}: {settings.results_dir} is not a directory")
    return settings


def given_as(field: str, flags: dict[str, object]) -> str:
    """How a setting was given: its flag where the command line set it, else its REPKV_
    environment variable (a bad REPKV_PORT was blamed on --port, which nobody typed)."""
    return f"--{field.replace('_', '-')}" if field in flags else f"REPKV_{field.upper()}"


def bind_problem(host: str, port: int) -> str | None:
    """Why the service could not listen on host:port (one line), or None. uvicorn binds only after
    the app's startup has loaded the store, so this is tried first: each address of `host` is
    bound as asyncio's create_server binds it (SO_REUSEADDR on POSIX, so a port that only closed
    connections linger on is free; IPV6_V6ONLY), then closed at once."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"--host: cannot resolve {host!r}: {exc.strerror}"
    for family, kind, proto, _, address in dict.fromkeys(addresses):
        try:
            with socket.socket(family, kind, proto) as sock:
                if os.name == "posix":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is in use; pick another with --port"
            return f"cannot listen on {host} port {port}: {exc.strerror or exc}"
    return None


def configure_logging(level: str) -> None:
    """The service's own messages (loads, skipped files, dropped rows, missing directories) on
    stderr, formatted as uvicorn's."""
    from uvicorn.logging import DefaultFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s", use_colors=False))
    for name in ("service", "results"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(level.upper())


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = settings_from(argv)
    except UsageError as exc:
        print(f"{program_name()}: {exc} (see --help)", file=sys.stderr)
        return 2
    problem = bind_problem(settings.host, settings.port)  # before the store is loaded
    if problem:
        print(f"{program_name()}: {problem}", file=sys.stderr)
        return 2
    import uvicorn

    configure_logging(settings.log_level)

    from service.api.app import create_app

    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=settings.access_log,
    )
    return 0
