"""What a tuning run sets up before its first trial: the GPU runner, the preflight checks,
the families searched (of the request's op, those the device runs)."""

from __future__ import annotations

from collections.abc import Mapping

from results.schema import DEFAULT_HOLD_US, L2_COLD
from results.store import user_results_dir
from tuner.run.preflight import (
    CUDA_HINT,
    PreflightError,
    check_cuda,
    check_default_journal,
    check_results_dir,
    check_storage,
)
from tuner.run.request import TuneError, TuneRequest
from tuner.runners.runner import Runner
from variants import DEFAULT_OP, DTYPES, Family, Op, compute_capability_number, get_op


def gpu_runner(
    device: int = 0,
    timeout_s: float = 10.0,
    hold_us: float = DEFAULT_HOLD_US,
    l2: str = L2_COLD,
    families: Mapping[str, Family] | None = None,
) -> Runner:
    """The GPU's runner (CuPy, imported only now): CuPy and the driver are probed here first,
    and a worker that dies while starting is a TuneError saying why, not a traceback."""
    try:
        check_cuda(device)
        from tuner.runners.gpu.runner import GpuBusy, GpuRunner, WorkerFailed
    except PreflightError as exc:
        raise TuneError(str(exc)) from None
    except ImportError as exc:
        raise TuneError(f"no GPU runner here ({exc}): {CUDA_HINT}") from None
    try:
        return GpuRunner(device=device, timeout_s=timeout_s, hold_us=hold_us, l2=l2, families=families)
    except GpuBusy as exc:
        raise TuneError(f"GPU {device}: {exc}") from None
    except (WorkerFailed, ConnectionError, TimeoutError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise TuneError(
            f"the GPU worker did not start ({lines[-1] if lines else type(exc).__name__}); "
            f"without a driver or CuPy: {CUDA_HINT}"
        ) from None


def preflight(request: TuneRequest, replaying: bool) -> None:
    """What can be checked before a worker starts and anything is measured: the results
    directory (a file written and removed there) and the storage (its file, or one
    connection to its server)."""
    results_dir = request.results_dir
    named = "--results"
    if results_dir is None and not replaying:
        results_dir, named = user_results_dir(), "the results directory (--results, $REPKV_RESULTS_DIR)"
    try:
        if results_dir is not None:
            check_results_dir(results_dir, named)
        if request.storage is None and results_dir is not None:
            check_default_journal(results_dir)
        check_storage(request.storage)
    except PreflightError as exc:
        raise TuneError(str(exc)) from None


def searched_families(request: TuneRequest, runner: Runner) -> dict[str, Family] | None:
    """The families searched: those `--family` names of the op, else every family of the op
    that the runner runs (None: repkv backward's, as the runner knows them). On a GPU, one its
    device is too old for is a TuneError before anything is measured."""
    op = get_op(request.op)
    if not request.families:
        if op.name == DEFAULT_OP:
            return None
        return {n: f for n, f in op.families.items() if runs_on_device(f, runner)}
    if request.replay_dir is None:
        too_new = [f for f in request.families if not runs_on_device(op.families[f], runner)]
        if too_new:
            runner.close()
            need = op.families[too_new[0]].min_compute_capability
            raise TuneError(
                f"family {too_new[0]} needs compute capability {need // 10}.{need % 10}; "
                f"{runner.identity.name} has {runner.identity.compute_capability}"
            )
    return {name: op.families[name] for name in request.families}


def runs_on_device(family: Family, runner: Runner) -> bool:
    number = compute_capability_number(runner.identity.compute_capability)
    return number is None or family.min_compute_capability <= number


def check_families_serve(op: Op, request: TuneRequest) -> None:
    """Every (shape, dtype) asked for must have a configuration among the --family families,
    before anything runs (a study with none would have nothing to search)."""
    for shape in request.shapes:
        for dtype in (DTYPES[d] for d in request.dtypes):
            families = [op.families[name] for name in request.families]
            if any(f.valid_configs(shape, dtype) for f in families):
                continue
            why = "; ".join(f"{f.name}: {f.rejection(shape, dtype, next(iter(f.space())))}" for f in families)
            raise TuneError(
                f"no configuration of --family {','.join(request.families)} serves {shape.key} "
                f"{dtype.name} ({why}): drop that shape or dtype, or add a family"
            )
