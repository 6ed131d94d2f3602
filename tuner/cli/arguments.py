"""Reading the command line's values, one rule for every subcommand.

Lists: a flag that takes several values takes them repeated or as a comma list, or both
(`--dtype bf16,fp16 --dtype fp32`). A `--shape` value holds one shape or several in a row
(`B=8,T=1024,NH=32,NH_KV=8,HD=128,B=1,T=256,NH=14,NH_KV=2,HD=64`): a name met again after
all five names starts the next shape, one met again before that is a mistake, and so is a next
shape that lacks a name (`B=8,...,HD=128,B=9`: B given twice). `tune` adds the shapes of
`--model` x `--batch` x `--seq` (`parse_shapes`).

Numbers and paths are checked where argparse reads them (the `type=` functions below), so a
bad one is a usage error naming the flag, never a traceback or a run that measures nothing.
Every number flag takes one of these types: a float flag never takes NaN or an infinity, and
each states its range.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tuner.cli.presets import DEFAULT_BATCH, DEFAULT_SEQ, DEFAULT_SHAPES, UnknownModel, model_shapes
from variants import DTYPES, InvalidShape, Shape
from variants.errors import RepkvTuneError

SEED_MAX = 2**32 - 1  # NumPy's generators, which Optuna's samplers seed, take 0 .. 2^32-1
HOUR_S = 3600.0  # the longest --trial-timeout, --heartbeat and --replay-delay
WEEK_S = 7 * 24 * 3600.0  # the longest --timeout (per shape and dtype)
_SHAPE_FIELDS = ("B", "T", "NH", "NH_KV", "HD")


NO_BUNDLED_HELP = "read the results directory alone, not the results bundled with the package beside it"


def results_alone_help(default: Path) -> str:
    """--results of the commands that read results (`best`, `export`): unlike the service's
    --results-dir, a directory given is read alone."""
    return (
        f"read DIR alone, without the results bundled with the package (unlike the service's "
        f"--results-dir, which serves them beside it; --no-bundled then changes nothing); "
        f"default: {default} and the bundled results"
    )


class UsageError(RepkvTuneError):
    """A mistake in the command line: the message says what to do."""


def results_to_read(results: Path | None, *, bundled: bool) -> list[Path]:
    """The directories `best` and `export` read: `--results DIR` alone, else the user's
    directory and the bundled results (`results.store.read_dirs`). A DIR that does not exist
    is a usage error (a typo, not an empty store), and so is a file, given or named by
    $REPKV_RESULTS_DIR (as the service refuses it)."""
    from results.store import read_dirs, user_results_dir

    if results is None:
        user = user_results_dir()
        if os.environ.get("REPKV_RESULTS_DIR") and user.exists() and not user.is_dir():
            raise UsageError(f"REPKV_RESULTS_DIR: {user} is not a directory")
        return read_dirs(bundled=bundled)
    if not results.is_dir():
        why = "not a directory" if results.exists() else "no such directory"
        raise UsageError(f"no trial rows under {results} ({results}: {why})")
    return [results]


def output_file(path: Path, named: str) -> Path:
    """`path`, checked before any work as a file that can be written (`-o`, `--save-reports`):
    a directory, a path under a file or an unwritable directory is a usage error."""
    from tuner.run.preflight import PreflightError, check_output_file

    try:
        check_output_file(path, named)
    except PreflightError as exc:
        raise UsageError(str(exc)) from None
    return path


def csv_values(values: Iterable[str] | None, flag: str | None = None) -> list[str]:
    """Repeated flags and comma lists, flattened: ['bf16,fp16', 'fp32'] -> [bf16, fp16, fp32].
    Given a `flag`, values that name nothing ('' or ',': a shell variable left empty) are a
    usage error, not a request for the flag's default."""
    names = []
    for value in values or []:
        found = [v.strip() for v in value.split(",") if v.strip()]
        if flag is not None and not found:
            raise UsageError(f"{flag} {value!r} names nothing: give one or more, or leave {flag} out")
        names += found
    return names


def parse_choices(
    values: Iterable[str] | None, known: Sequence[str], flag: str, default: Sequence[str]
) -> list[str]:
    """Names out of `known` (repeated or comma lists; each once, in order); `default` without any."""
    names = csv_values(values, flag) or list(default)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown {flag[2:]} {unknown[0]!r}: use {flag} with {', '.join(known)}")
    return list(dict.fromkeys(names))


def parse_dtypes(values: Iterable[str] | None) -> list[str]:
    """dtype names in any case (`--dtype BF16` is bf16), as the service reads them."""
    folded = None if values is None else [v.lower() for v in values]
    return parse_choices(folded, list(DTYPES), "--dtype", list(DTYPES))


def _given_twice(name: str, text: str, note: str = "") -> InvalidShape:
    return InvalidShape(
        f"{name} is given twice in shape {text!r}: give each of {', '.join(_SHAPE_FIELDS)} once "
        f"(several shapes: repeat --shape, or list all five names of each shape in turn{note})"
    )


_PAIR = re.compile(r"\w+\s*=\s*-?\d+")  # one NAME=VALUE of a shape, as Shape.parse reads it


def split_shapes(text: str) -> list[str]:
    """One --shape value as the texts of its shapes (see the module's notes). A shape after the
    first that lacks a name is taken for a name given twice, and said so."""
    shapes: list[list[str]] = [[]]
    names: list[set[str]] = [set()]
    for part in filter(None, (p.strip() for p in text.split(","))):
        if not _PAIR.fullmatch(part):  # 'HD=128 B=1' (a space between shapes) is no name given twice
            raise InvalidShape(
                f"cannot read {part!r} in shape {text!r}: expected B=..,T=..,NH=..,NH_KV=..,HD=.."
            )
        name = part.split("=", 1)[0].strip()
        if name in names[-1]:
            if not names[-1].issuperset(_SHAPE_FIELDS):
                raise _given_twice(name, text)
            shapes.append([])
            names.append(set())
        names[-1].add(name)
        shapes[-1].append(part)
    for parts, seen in zip(shapes[1:], names[1:], strict=True):
        # only names of a shape, yet not all five: the first one repeats the shape before it
        # (a name that is none of the five is left to Shape.parse to point at)
        if seen.issubset(_SHAPE_FIELDS) and not seen.issuperset(_SHAPE_FIELDS):
            missing = ", ".join(f for f in _SHAPE_FIELDS if f not in seen)
            first = parts[0].split("=", 1)[0].strip()
            raise _given_twice(first, text, f"; {','.join(parts)!r} lacks {missing}")
    found = [",".join(parts) for parts in shapes if parts]
    if not found:  # '' or ',': a shell variable left empty, not a request for the default set
        raise InvalidShape(f"{text!r} names no shape: give B=..,T=..,NH=..,NH_KV=..,HD=..")
    return found


def parse_shape_values(values: Iterable[str] | None) -> list[Shape]:
    """The shapes of repeated --shape values, each once, in order (UsageError on a bad one)."""
    try:
        shapes = [Shape.parse(s) for value in values or [] for s in split_shapes(value)]
    except InvalidShape as exc:
        raise UsageError(f"--shape: {exc}") from None
    return list(dict.fromkeys(shapes))


def _ints(values: list[str] | None, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in csv_values(values, flag))
    except ValueError:
        raise UsageError(f"{flag} takes whole numbers, e.g. {flag} 1,8") from None


def parse_shapes(args: argparse.Namespace) -> list[Shape]:
    """--shape ... and --model ... x --batch x --seq; the default set without either."""
    try:
        shapes = parse_shape_values(args.shape)
        batches = _ints(args.batch, "--batch") or DEFAULT_BATCH
        seqs = _ints(args.seq, "--seq") or DEFAULT_SEQ
        models = csv_values(args.model, "--model")
        if (args.batch or args.seq) and not models:
            raise UsageError("--batch and --seq go with --model NAME (or give --shape B=..,T=..,...)")
        shapes += [s for s in _model_shapes(models, batches, seqs) if s not in shapes]
    except (InvalidShape, UnknownModel) as exc:
        raise UsageError(str(exc)) from None
    return shapes or list(DEFAULT_SHAPES)


def _model_shapes(models: list[str], batches: tuple[int, ...], seqs: tuple[int, ...]) -> list[Shape]:
    """The --model shapes; one a limit refuses names the flag that gave its B or T, as a bad
    --shape names --shape."""
    try:
        return model_shapes(models, batches, seqs)
    except InvalidShape as exc:
        flag = {"B": "--batch", "T": "--seq"}.get(exc.field, "--model")
        raise InvalidShape(f"{flag}: {exc}", exc.field) from None


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars on standard error: unless --no-progress, and only on a terminal."""
    return not getattr(args, "no_progress", False) and sys.stderr.isatty()


ARCH = re.compile(r"(sm|compute)_\d{2,3}[af]?")


def parse_archs(values: Iterable[str] | None, default: Sequence[str]) -> list[str]:
    archs = csv_values(values, "--arch") or list(default)
    bad = [a for a in archs if not ARCH.fullmatch(a)]
    if bad:
        raise UsageError(f"cannot read --arch {bad[0]!r}: give a target such as sm_90 or sm_80,sm_90")
    return list(dict.fromkeys(archs))


# --- argparse types: a ValueError or ArgumentTypeError becomes "argument --flag: <message>" ----
def _number(kind: type, text: str, what: str) -> int | float:
    """`text` as `kind`; a float flag never takes NaN or an infinity (no flag means either)."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes {what}, not {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"takes {what}, not {text!r}")
    return value


def _bounded(
    name: str, kind: type, what: str, ok: Callable[[float], bool], note: str = ""
) -> Callable[[str], float]:
    """An argparse type: `text` read as `kind`, refused with "takes <what><note>, not <text>"
    unless `ok(value)`."""

    def parse(text: str):
        value = kind(_number(kind, text, what))
        if not ok(value):
            raise argparse.ArgumentTypeError(f"takes {what}{note}, not {text}")
        return value

    parse.__name__ = parse.__qualname__ = name
    parse.kind = kind  # type: ignore[attr-defined]  # what tests look for: every float flag is one of these
    return parse


positive_int = _bounded("positive_int", int, "a whole number of at least 1", lambda v: v >= 1)
nonnegative_int = _bounded("nonnegative_int", int, "a whole number of at least 0", lambda v: v >= 0)
seed = _bounded("seed", int, f"a whole number from 0 to {SEED_MAX}", lambda v: 0 <= v <= SEED_MAX)
positive_seconds = _bounded(
    "positive_seconds", float, f"seconds above 0, at most {HOUR_S:g}", lambda v: 0 < v <= HOUR_S
)
# a limit that may be left out (no limit), never 0 or less: such a run measures nothing
time_limit = _bounded(
    "time_limit",
    float,
    "seconds above 0",
    lambda v: 0 < v <= WEEK_S,
    f" (leave it out for no limit), at most {WEEK_S:g}",
)
# a wait that may be 0 (none)
delay_seconds = _bounded("delay_seconds", float, f"seconds from 0 to {HOUR_S:g}", lambda v: 0 <= v <= HOUR_S)
# a sign of life: the storages count whole seconds, and a worker silent for 4 is taken for dead
heartbeat_seconds = _bounded(
    "heartbeat_seconds", float, f"seconds from 1 to {HOUR_S:g}", lambda v: 1 <= v <= HOUR_S
)
nonnegative_fraction = _bounded(
    "nonnegative_fraction",
    float,
    "a fraction of at least 0, e.g. 0.02 for 2%",
    lambda v: v >= 0,
)
positive_number = _bounded("positive_number", float, "a number above 0", lambda v: v > 0)
# a wait that may be 0 (none), never negative nor infinite
microseconds = _bounded("microseconds", float, "microseconds from 0", lambda v: 0 <= v < 1e6)


def nonempty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a value, not an empty string")
    return text


def _path(text: str, what: str) -> Path:
    """A path argument: never empty (an empty path would be the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"needs {what}, not an empty string")
    return Path(text).expanduser()


def file_path(text: str) -> Path:
    return _path(text, "a file")


def directory(text: str) -> Path:
    return _path(text, "a directory")
