"""The race a PyTorch op runs on the first call for a shape nobody tuned: the shortlist's kernels
timed on the device (`repkv_tune.race_bench`: fresh random dout, L2 flushed before every call and
the GPU held after it, as the tuner times; median of RACE_REPS x RACE_ROUNDS, interleaved), the
decision left to `tuner.runners.race`, and, where the user allows it, the measurements recorded as trial
rows of this process's own run (`tuner.runners.race_record`). `repkv_tune.launcher` calls `race` once
per (op, shape, dtype, device) and keeps the winner; every op races, on its own inputs and output."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from repkv_tune.race_bench import L2, RACE_HOLD_US, RaceBench
from results.schema import COPY_FASTEST
from tuner.runners.race import run_race
from variants.compile_cache import OFF

if TYPE_CHECKING:
    from repkv_tune.launcher import Launcher
    from tuner.runners.race import RaceResult
    from tuner.runners.race_record import RaceRecorder
    from tuner.runners.runner import GpuIdentity
    from variants import DType, Op, Shape

log = logging.getLogger("repkv_tune.ops")


def switched_on(name: str, default: str) -> bool:
    """Whether the environment variable `name` (unset: `default`) is on: an on/off variable
    (REPKV_RACE, REPKV_RECORD) is off for the values that turn $REPKV_NVRTC_CACHE off."""
    return os.environ.get(name, default).strip().lower() not in OFF


RACE = switched_on("REPKV_RACE", "1")
# Rounds of the race, every candidate once a round, interleaved (tuner.runners.race.run_race): 35
# samples a candidate, enough to tell apart two configurations 2% apart, in milliseconds.
RACE_ROUNDS = 5


def race(
    launchers: list[Launcher],
    op: Op,
    shape: Shape,
    dtype: DType,
    device: int,
    gpu: str,
    refine: Callable[[Launcher], list[Launcher]] | None = None,
) -> Launcher:
    """Time each candidate on fresh input (L2 flushed before every call; median of RACE_REPS
    calls in each of RACE_ROUNDS interleaved rounds) and keep the fastest for the process
    (`tuner.runners.race`: the served configuration stays unless another beats it by more than
    RACE_MARGIN; a candidate that fails is skipped). Takes tens of milliseconds once compiled.
    With `refine` (where the head layout was never tuned), the winner then races what
    `refine(winner)` compiles, its one-parameter neighbours: a local search's first step, which
    keeps the winner unless a neighbour beats it by RACE_MARGIN too.
    When recording, each candidate's output is validated before it is timed, a device copy
    of the same bytes is timed too, and the measurements are written as rows of this
    process's race run."""
    recorder = _recorder()
    with torch.cuda.device(device):
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            bench = RaceBench(op, shape, dtype, device, stream)

            def race_of(candidates: list[Launcher]) -> Launcher:
                return _race_on(bench, candidates, gpu, recorder)

            winner = _refined(race_of(launchers), refine, race_of)
        stream.synchronize()
    return winner


def _refined(
    winner: Launcher,
    refine: Callable[[Launcher], list[Launcher]] | None,
    race_of: Callable[[list[Launcher]], Launcher],
) -> Launcher:
    """The race's winner against its neighbours (`refine(winner)`, which leaves out those that
    cannot be compiled; those the first race timed are not timed again) in another race
    (`race_of`), the winner first. The first race's timings stay on the winner, before the
    second's."""
    if refine is None or not winner.race:
        return winner
    raced = {key for key, _ in winner.race}
    steps = [step for step in refine(winner) if step.config_key not in raced]
    if not steps:
        return winner
    first = winner.race
    refined = race_of([winner, *steps])
    if refined.race:
        refined.race = first + tuple(t for t in refined.race if t[0] != winner.config_key)
    if refined is not winner:
        refined.served_from = "refined"
    return refined


def _race_on(
    bench: RaceBench, launchers: list[Launcher], gpu: str, recorder: RaceRecorder | None
) -> Launcher:
    """The race on a bench (`repkv_tune.race_bench.RaceBench`: its op, shape, dtype and device;
    `time`, `check`, `copy_ms`), recorded by `recorder` unless it is None."""
    shape, dtype = bench.shape, bench.dtype
    unchecked: set[int] = set()  # ids of candidates whose check itself failed
    checked: set[int] = set()  # ids of candidates validated (once, before their first round)

    def time_candidate(launcher: Launcher) -> list[float]:
        if recorder is not None and id(launcher) not in checked:
            _check_for_recording(bench, launcher, unchecked)
            checked.add(id(launcher))
        return bench.time(launcher)

    result = run_race(launchers, time_candidate, describe=lambda lch: lch.config_key, rounds=RACE_ROUNDS)
    copy_ms = _copy_ms_or_none(bench) if recorder is not None and result.timed else None
    timings = ", ".join(f"{t.candidate.config_key} {t.median_ms:.4f} ms" for t in result.timed)
    log.info(
        "raced %s of %s for %s %s: %s",
        len(launchers),
        bench.op.name,
        shape,
        dtype.name,
        timings or "every one failed",
    )
    winner = result.winner
    if result.timed:
        winner.served_from = "raced"
        winner.race = tuple((t.candidate.config_key, t.median_ms) for t in result.timed)
    if recorder is not None:
        checked = replace(result, timed=tuple(t for t in result.timed if id(t.candidate) not in unchecked))
        recorder.record(gpu, lambda run_id: _race_rows(checked, bench, gpu, copy_ms, run_id))
    return winner


def _check_for_recording(bench: RaceBench, launcher: Launcher, unchecked: set[int]) -> None:
    """Validate a candidate before its time is recorded: a wrong result raises (the race skips
    it, and its row says so); a check that cannot run (e.g. out of memory) leaves the
    candidate in the race but out of the rows, which claim a validated output."""
    from tuner.runners.race_record import WrongResult

    try:
        bench.check(launcher)
    except WrongResult:
        raise
    except Exception as exc:
        unchecked.add(id(launcher))
        log.warning(
            "could not validate %s for the race's rows: %s: %s", launcher.config_key, type(exc).__name__, exc
        )


def _copy_ms_or_none(bench: RaceBench) -> float | None:
    try:
        return bench.copy_ms()
    except Exception as exc:
        log.warning("could not time the device copy for the race's rows: %s: %s", type(exc).__name__, exc)
        return None


def _race_rows(
    result: RaceResult[Launcher], bench: RaceBench, gpu: str, copy_ms: float | None, run_id: str
) -> list[dict]:
    from tuner.runners.race_record import race_rows

    return race_rows(
        result,
        lambda launcher: launcher.config,
        identity=_identity(bench.device),
        gpu=gpu,
        shape=bench.shape,
        dtype=bench.dtype,
        copy_ms=copy_ms,
        run_id=run_id,
        families=bench.op.families,
    )


_IDENTITIES: dict[int, GpuIdentity] = {}


def _identity(device: int) -> GpuIdentity:
    """The device as a trial row names it (`tuner.runners.gpu.session.read_identity`), read once; a
    race times with RACE_HOLD_US after its flush, and holds to the tuner's copy."""
    identity = _IDENTITIES.get(device)
    if identity is None:
        import cupy as cp

        from tuner.runners.gpu.session import read_identity

        timed_alike = replace(
            read_identity(cp.cuda.Device(device)), hold_us=RACE_HOLD_US, l2=L2, copy_method=COPY_FASTEST
        )
        identity = _IDENTITIES.setdefault(device, timed_alike)
    return identity


# Recording: a race's measurements become trial rows of this process's own run
# (`tuner.runners.race_record`), where the user allows it: REPKV_RECORD=1 (read when a race runs)
# records under the user's results directory, `record_races()` anywhere. Off by default.
_RECORD: Path | bool | None = None  # None: REPKV_RECORD decides; False: off; True: user dir
_RECORDERS: dict[Path, RaceRecorder] = {}


def record_races(enabled: bool = True, directory: Path | str | None = None) -> None:
    """Record the measurements of every later race of this process as trial rows under
    `directory` (default: `results.store.user_results_dir()`, i.e. $REPKV_RESULTS_DIR or the
    user data directory), or stop recording (`enabled=False`). Overrides REPKV_RECORD."""
    global _RECORD
    if not isinstance(enabled, bool):  # record_races("races/") would record in the user directory
        raise TypeError(
            f"record_races: enabled must be True or False, got {enabled!r}; a directory goes as directory=..."
        )
    _RECORD = False if not enabled else (Path(directory) if directory is not None else True)


def _recording_directory() -> Path | None:
    setting = _RECORD
    if setting is None:
        setting = switched_on("REPKV_RECORD", "0")
    if setting is False:
        return None
    if setting is True:
        from results.store import user_results_dir

        return user_results_dir()
    return setting


def _recorder() -> RaceRecorder | None:
    """The recorder for the directory races are recorded under now, or None (recording off,
    or it could not be set up: logged, never raised)."""
    try:
        directory = _recording_directory()
        if directory is None:
            return None
        recorder = _RECORDERS.get(directory)
        if recorder is None:
            from tuner.runners.race_record import RaceRecorder

            recorder = _RECORDERS.setdefault(directory, RaceRecorder(directory))
        return recorder
    except Exception as exc:
        log.warning("not recording the race: %s: %s", type(exc).__name__, exc)
        return None
