"""What a tuning run checks before it measures anything (or starts a GPU worker): that the
results directory takes files, that the Optuna storage can be opened, and that this host has
CuPy and a CUDA driver that serves it. A failed check raises PreflightError, whose one-line
message names the flag and says what to do; without these checks each mistake surfaced as
a traceback, some only after the first measurement.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from variants.errors import RepkvTuneError

CONNECT_TIMEOUT_S = 5  # one attempt to reach a database server
STORAGE_HINT = (
    "use journal:FILE (the processes of one host), postgresql://USER@HOST/DB (several hosts), "
    "sqlite:///FILE or memory"
)
RDB_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql")
CUDA_HINT = (
    "pip install 'repkv-tune[cuda12]' (CUDA 12 driver) or 'repkv-tune[cuda13]' (CUDA 13 driver); "
    "or tune without a GPU: --replay DIR"
)


class PreflightError(RepkvTuneError, ValueError):
    """A check before the run failed: the message says what to do."""


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _probe_dir(directory: Path) -> None:
    """Create, write and remove a file in `directory` (OSError if any step fails)."""
    fd, name = tempfile.mkstemp(prefix=".write-probe-", dir=directory)
    try:
        os.write(fd, b"probe\n")
    finally:
        os.close(fd)
        os.unlink(name)


def _nearest(path: Path) -> Path:
    """`path`, or the first of its parents that exists."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path.cwd()


def _writable_dir(directory: Path, named: str, hint: str) -> None:
    """A directory that is there and takes a new file, or could be made (probed in its
    nearest existing parent, which then must take one): nothing is left behind."""
    nearest = _nearest(directory)
    if not nearest.is_dir():
        where = "is a file" if nearest == directory else f"is under {nearest}, a file"
        raise PreflightError(f"{named} {directory} {where}: {hint}")
    try:
        _probe_dir(nearest)
    except OSError as exc:
        raise PreflightError(f"{named} {directory}: cannot write there ({_why(exc)}): {hint}") from None


def check_results_dir(directory: Path, named: str = "--results") -> None:
    """The results directory exists or can be made, and a file can be written in it."""
    _writable_dir(Path(directory), named, "give a directory you can write")


def check_output_file(path: Path, named: str) -> None:
    """A file a command writes whole (through a temporary beside it): not a directory, and in a
    directory that exists or can be made and takes a new file. Nothing is left behind."""
    if path.is_dir():
        raise PreflightError(f"{named} {path} is a directory: name the file to write")
    _writable_dir(path.parent, f"{named} {path}:", "name a file in a directory you can write")


def _cannot_append(path: Path) -> str | None:
    """Why an existing file cannot be opened for appending (nothing is written), or None."""
    try:
        with path.open("ab"):
            pass
    except OSError as exc:
        return _why(exc)
    return None


def _check_file(path: Path, named: str) -> None:
    """A file that can be appended to: an existing one opened, a new one's directory probed."""
    if path.is_dir():
        raise PreflightError(f"{named}: {path} is a directory: name a file in it")
    if path.exists():
        why = _cannot_append(path)
        if why is not None:
            raise PreflightError(f"{named}: cannot write {path} ({why}): name a file you can write")
        return
    _writable_dir(path.parent, f"{named}:", "name a file in a directory you can write")


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database


def _holds_a_study(path: Path, kind: str) -> bool:
    """Whether an existing file can be a study's storage of `kind` (journal or sqlite): empty,
    or an SQLite database, or a journal whose first line is one of Optuna's log records."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER)) if kind == "sqlite" else handle.readline(1 << 20)
    except OSError:
        return True  # not readable: left to the storage, which says why
    if not head:
        return True
    if kind == "sqlite":
        return head == SQLITE_HEADER
    try:
        record = json.loads(head)
    except ValueError:
        return False
    return isinstance(record, dict) and "op_code" in record


def _check_study_file(path: Path, named: str, kind: str) -> None:
    _check_file(path, named)
    if path.is_file() and not _holds_a_study(path, kind):
        what = "an SQLite database" if kind == "sqlite" else "an Optuna journal"
        raise PreflightError(f"{named}: {path} is not {what}: name a new file, or the one a run made")


def check_default_journal(results_dir: Path) -> None:
    """The journal a run keeps in its results directory when --storage is not given
    (`tuner.study.storage.default_storage_url`): refused when something that is not an Optuna
    journal (a directory, another file) has its name, as a --storage journal:FILE would be."""
    from tuner.study.storage import default_storage_url

    path = Path(default_storage_url(results_dir).removeprefix("journal:"))
    if path.is_dir() or (path.is_file() and not _holds_a_study(path, "journal")):
        raise PreflightError(
            f"{path} is not an Optuna journal, and a run keeps its study there when --storage is not "
            "given: move it away, or give --storage journal:FILE"
        )
    why = _cannot_append(path) if path.is_file() else None
    if why is not None:
        raise PreflightError(
            f"cannot write {path} ({why}), where a run keeps its study when --storage is not "
            "given: make it writable, or give --storage journal:FILE"
        )


def check_storage(url: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A journal or SQLite file that can be written, or a database server that answers one
    connection within `timeout_s`. Other URLs are left to `tuner.study.storage.make_storage`."""
    if url is None or url in ("memory", ":memory:"):
        return
    if url.startswith("journal:"):
        path = Path(url[len("journal:") :]).expanduser()
        if path.name:
            _check_study_file(path, f"--storage {url}", "journal")
        return
    if "://" not in url:
        return
    scheme = url.split("://", 1)[0]
    if scheme.split("+", 1)[0] not in RDB_SCHEMES:
        raise PreflightError(
            f"--storage {scheme}://...: this tuner cannot keep a study there: {STORAGE_HINT}"
        )
    if scheme.startswith("sqlite"):
        from tuner.study.storage import InvalidStorage, open_sqlite, sqlite_file

        db = sqlite_file(url)
        if db is not None:
            _check_study_file(db, f"--storage {url}", "sqlite")
            try:  # its directory exists, and no other process has it open
                open_sqlite(db, url)
            except InvalidStorage as exc:
                raise PreflightError(f"--storage {exc}") from None
        return
    _connect_once(url, timeout_s)


def _connect_once(url: str, timeout_s: float) -> None:
    import sqlalchemy
    import sqlalchemy.exc

    from tuner.study.storage import database_words, normalize_url, shown_url

    shown = shown_url(url)
    try:
        engine = sqlalchemy.create_engine(
            normalize_url(url), connect_args={"connect_timeout": max(1, round(timeout_s))}
        )
    except ImportError as exc:
        raise PreflightError(
            f"--storage {shown}: no database driver here ({exc}): pip install 'repkv-tune[postgres]'"
        ) from None
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise PreflightError(f"--storage {shown}: cannot read this URL ({exc}): {STORAGE_HINT}") from None
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise PreflightError(
            f"--storage {shown}: cannot connect ({database_words(exc)}): "
            "check that the server runs and can be reached from here, and the database, user and password"
        ) from None
    finally:
        engine.dispose()


def check_cuda(device: int = 0) -> None:
    """CuPy imports and the CUDA runtime sees `device` (the driver is loaded to count the
    GPUs; no context is made here, the worker process makes its own)."""
    try:
        import cupy
    except ImportError as exc:
        why = "CuPy is not installed" if exc.name == "cupy" else f"CuPy does not import ({exc})"
        raise PreflightError(f"no GPU to tune on: {why}: {CUDA_HINT}") from None
    except Exception as exc:  # a CuPy that cannot load its CUDA libraries
        raise PreflightError(f"no GPU to tune on: CuPy does not load ({exc}): {CUDA_HINT}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cupy.cuda.runtime.CUDARuntimeError: no driver, or one too old
        first = str(exc).strip().splitlines()
        raise PreflightError(
            f"no GPU to tune on ({first[0] if first else type(exc).__name__}): "
            f"install an NVIDIA driver and the CuPy for its CUDA, {CUDA_HINT}"
        ) from None
    if count < 1:
        raise PreflightError(
            f"no GPU to tune on: CUDA sees none (is CUDA_VISIBLE_DEVICES empty?): {CUDA_HINT}"
        )
    if device >= count:
        raise PreflightError(f"--device {device}: this host has {count} GPU(s): give 0 to {count - 1}")
