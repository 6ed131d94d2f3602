"""Which files under the results directories are results files, and which entries named
`*.parquet` are not (and why), so that every such entry is either read or reported.

Nothing here opens a file: a FIFO named `*.parquet` would block its reader. Symbolic links to
files are followed; symbolic links to directories are not descended (as `Path.rglob` does),
so a link loop cannot make a listing endless.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

SUFFIX = ".parquet"
TEMP_PREFIX = ".tmp-"  # a writer's temporary file (results.store): neither read nor reported


@dataclass
class Listing:
    """The results files under some directories, in order, and the entries named `*.parquet`
    that are not files, and the directories that cannot be listed (path -> why)."""

    files: list[Path] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _directories(directories: Path | Iterable[Path]) -> list[Path]:
    if isinstance(directories, (str, os.PathLike)):
        return [Path(directories)]
    return [Path(d) for d in directories]


def resolved(path: Path) -> Path:
    return Path(path).expanduser().resolve()


def _not_a_file(path: Path) -> str | None:
    """None for a regular file (or a link to one); why not otherwise."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop, not a file"
        if exc.errno == errno.ENOENT and path.is_symlink():
            return "a symbolic link to nothing: its target does not exist"
        return f"cannot be read: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO, not a file: never opened"
    return "not a regular file (a socket or a device): never opened"


def _entries(directory: Path, unreadable: dict[str, str]) -> list[Path]:
    """Every entry named *.parquet under directory, temporaries left out, in path order. A
    directory that cannot be listed (no permission) goes into `unreadable` (path -> why)."""
    found = []

    def cannot_list(exc: OSError) -> None:
        why = exc.strerror or str(exc)
        unreadable[str(exc.filename)] = f"a directory that cannot be read ({why}): nothing under it is read"

    for root, dirs, names in os.walk(directory, onerror=cannot_list):
        base = Path(root)
        found += [base / n for n in (*dirs, *names) if n.endswith(SUFFIX) and not n.startswith(TEMP_PREFIX)]
    return sorted(found)


def list_results(directories: Path | Iterable[Path]) -> Listing:
    """The results files of each directory in turn, each file once (one reached through two of
    the directories, or through a link, is listed where it is met first), and every other entry
    named `*.parquet`, and every directory that cannot be listed, with why it is not read.
    Directories that do not exist list nothing."""
    listing = Listing()
    seen: set[Path] = set()
    for directory in _directories(directories):
        if not directory.is_dir():
            continue
        for path in _entries(directory, listing.skipped):
            why = _not_a_file(path)
            if why is not None:
                listing.skipped[str(path)] = why
                continue
            real = resolved(path)
            if real not in seen:
                seen.add(real)
                listing.files.append(path)
    return listing


def result_files(directory: Path) -> list[Path]:
    """The parquet files under directory, temporary ones left out."""
    return list_results(directory).files


def results_files_of(directories: Path | Iterable[Path]) -> list[Path]:
    """result_files of each directory in turn, each file once."""
    return list_results(directories).files


def missing_directories(directories: Path | Iterable[Path]) -> list[Path]:
    return [d for d in _directories(directories) if not d.is_dir()]
