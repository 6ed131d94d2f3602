"""`python -m tuner`: tune this GPU (the default subcommand), list the variants, compile
them offline, show the winners, or measure how fast the samplers find the optimum.

    python -m tuner --gpu h100                        # = python -m tuner tune --gpu h100
    python -m tuner tune --model llama3-8b --batch 1,8 --seq 1024,4096 --dtype bf16
    python -m tuner tune --gpu h200 --replay results/data --results /tmp/replayed
    python -m tuner variants --shape B=8,T=1024,NH=32,NH_KV=8,HD=128
    python -m tuner check --arch sm_90
    python -m tuner best --gpu h200
    python -m tuner export --format cuda-header --gpu h200 -o repkv_tuned.cuh
    python -m tuner replay-eval results/data --gpu h200 --seeds 20
    python -m tuner --devices all                     # a worker per GPU of this host, one study
    python -m tuner merge host-a/ host-b/ -o merged/  # several results directories in one

This module parses, dispatches (COMMANDS) and renders; tuning is `tuner.pipeline.tune`.
Usage errors print one line that says what to do and return 2. Nothing here imports CuPy
until a GPU is actually asked for.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from results.schema import SHAPE_COLUMNS
from results.store import load_results, read_dirs, user_results_dir
from tuner.arguments import (
    UsageError,
    directory,
    nonempty,
    nonnegative_fraction,
    nonnegative_int,
    parse_dtypes,
    parse_shape_values,
    positive_int,
    positive_number,
    positive_seconds,
    seed,
    time_limit,
)
from tuner.arguments import csv_values as _csv
from tuner.interrupt import EXIT_INTERRUPTED
from tuner.presets import (
    DEFAULT_BATCH,
    DEFAULT_SEQ,
    DEFAULT_SHAPES,
    DEFAULT_TRIALS,
    MODELS,
    UnknownModel,
    model_shapes,
)
from tuner.runner import Runner
from tuner.samplers import SAMPLERS, UnavailableSampler, make_sampler
from tuner.study import HEARTBEAT_S
from variants import InvalidShape, Shape

if TYPE_CHECKING:
    from tuner.pipeline import TuneRequest, TuneResult

DEFAULT_RESULTS = user_results_dir()
LLMC_SHAPE = "B=8,T=1024,NH=32,NH_KV=8,HD=128"
BEST_FORMATS = ("table", "json", "csv")


def _ints(values: list[str] | None, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in _csv(values))
    except ValueError:
        raise UsageError(f"{flag} takes whole numbers, e.g. {flag} 1,8") from None


def parse_shapes(args: argparse.Namespace) -> list[Shape]:
    """--shape ... and --model ... x --batch x --seq; the default set without either."""
    try:
        shapes = parse_shape_values(args.shape)
        batches = _ints(args.batch, "--batch") or DEFAULT_BATCH
        seqs = _ints(args.seq, "--seq") or DEFAULT_SEQ
        models = _csv(args.model)
        if (args.batch or args.seq) and not models:
            raise UsageError("--batch and --seq go with --model NAME (or give --shape B=..,T=..,...)")
        shapes += [s for s in model_shapes(models, batches, seqs) if s not in shapes]
    except (InvalidShape, UnknownModel) as exc:
        raise UsageError(str(exc)) from None
    return shapes or list(DEFAULT_SHAPES)


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars on standard error: unless --no-progress, and only on a terminal."""
    return not getattr(args, "no_progress", False) and sys.stderr.isatty()


# --- parser -----------------------------------------------------------------------------
def _add_tune(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="search the variants on this GPU (the default subcommand)",
        description="Search the kernel variants with Optuna; write every trial to parquet.",
    )
    g = p.add_argument_group("device")
    g.add_argument("--gpu", help="label to file results under (default: from the device name, e.g. h200)")
    g.add_argument(
        "--force-gpu-label", action="store_true", help="accept a --gpu label that does not match the device"
    )
    g.add_argument("--device", type=nonnegative_int, default=0, help="CUDA device index (default 0)")
    g.add_argument(
        "--devices",
        metavar="all|0,1,..",
        help="one measuring process per GPU (all of this host's, or these), sharing each study",
    )
    g.add_argument(
        "--trial-timeout",
        type=positive_seconds,
        default=10.0,
        help="seconds before a hung kernel's worker is killed",
    )
    g.add_argument(
        "--replay", type=directory, metavar="DIR", help="answer trials from recorded parquet (no GPU)"
    )
    g.add_argument(
        "--replay-delay",
        type=float,
        default=0.0,
        metavar="S",
        help="with --replay: answer each trial after S seconds, as a GPU would take",
    )
    s = p.add_argument_group("shapes")
    s.add_argument("--shape", action="append", metavar="B=..,T=..,NH=..,NH_KV=..,HD=..", help="repeatable")
    s.add_argument(
        "--model", action="append", metavar="NAME", help=f"repeatable or comma list: {', '.join(MODELS)}"
    )
    s.add_argument("--batch", action="append", metavar="B,..", help="batch sizes for --model (default 8)")
    s.add_argument(
        "--seq", action="append", metavar="T,..", help="sequence lengths for --model (default 1024)"
    )
    s.add_argument("--dtype", action="append", metavar="fp32,bf16,fp16", help="default: all three")
    o = p.add_argument_group("search")
    o.add_argument(
        "--trials",
        type=positive_int,
        default=DEFAULT_TRIALS,
        help=f"configurations per shape and dtype (default {DEFAULT_TRIALS}; grid: all)",
    )
    o.add_argument("--timeout", type=time_limit, help="seconds per shape and dtype (default: no limit)")
    o.add_argument("--sampler", default="tpe", help=f"{' | '.join(SAMPLERS)} (default tpe)")
    o.add_argument("--seed", type=seed, help="sampler seed (default: a fresh one, recorded in every row)")
    o.add_argument(
        "--storage",
        type=nonempty,
        help="Optuna storage: journal:FILE (default <results>/optuna.journal; the processes of one host), "
        "postgresql://... (several hosts), sqlite:///FILE (one process), or memory",
    )
    o.add_argument(
        "--heartbeat",
        type=float,
        default=HEARTBEAT_S,
        metavar="S",
        help=f"seconds between a running trial's signs of life; a worker silent for 4 is taken for dead "
        f"and its configuration measured by another (default {HEARTBEAT_S:g})",
    )
    o.add_argument("--study", help="study name prefix (default: repkv-<kernel hash>/<gpu>/<shape>/<dtype>)")
    r = p.add_argument_group("results")
    r.add_argument(
        "--results",
        type=directory,
        help=(
            f"results directory (default: $REPKV_RESULTS_DIR or the user data dir, now {DEFAULT_RESULTS}; "
            "with --replay: none)"
        ),
    )
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.add_argument(
        "--no-bundled",
        dest="bundled",
        action="store_false",
        help="measure what the results bundled with the package hold too (by default they answer)",
    )


def _add_variants(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("variants", help="list the kernel families, their parameters and valid configurations")
    p.add_argument(
        "--shape", action="append", metavar="B=..,T=..,NH=..,NH_KV=..,HD=..", help=f"default {LLMC_SHAPE}"
    )
    p.add_argument("--dtype", action="append", metavar="fp32,bf16,fp16", help="default: all three")


def _add_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="compile every valid configuration offline with NVRTC (no GPU needed)")
    try:
        from tuner.check import add_check_arguments
    except ImportError:
        p.add_argument("rest", nargs=argparse.REMAINDER)
        return
    add_check_arguments(p)


def _add_best(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("best", help="print the winners table of a results directory")
    p.add_argument("--results", type=directory, help=f"default {DEFAULT_RESULTS} and the bundled results")
    p.add_argument("--gpu", help="only this GPU label")
    p.add_argument("--format", choices=BEST_FORMATS, default="table", help="table (default), json or csv")


def _add_export(sub: argparse._SubParsersAction) -> None:
    from tuner.export_cli import add_export_arguments

    p = sub.add_parser("export", help="write one GPU's winners as a CUDA header for llm.c, or as JSON")
    add_export_arguments(p, DEFAULT_RESULTS)


def _add_merge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge", help="copy the trial rows of several results directories into one, each row once"
    )
    p.add_argument("sources", nargs="+", type=directory, metavar="DIR", help="results directories to read")
    p.add_argument(
        "-o", "--output", type=directory, required=True, metavar="DIR", help="the directory to write"
    )


def _add_replay_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay-eval",
        help="trials each sampler needs to come within 2%% of the optimum, on exhaustive recordings",
    )
    p.add_argument("recording", type=directory, help="results directory holding exhaustive (grid) trials")
    p.add_argument("--gpu", help="GPU label (default: the recording's only one)")
    p.add_argument("--samplers", default="tpe,random", help="comma list (default tpe,random)")
    p.add_argument("--seeds", type=positive_int, default=20, help="seeds per shape and dtype (default 20)")
    p.add_argument(
        "--tolerance", type=nonnegative_fraction, default=0.02, help="distance to the optimum (default 0.02)"
    )
    p.add_argument(
        "--max-trials", type=positive_int, default=200, help="give up after this many (default 200)"
    )
    p.add_argument("--jobs", type=positive_int, default=1, help="processes (default 1)")
    p.add_argument(
        "--target", type=positive_number, default=25, help="trials the first sampler must stay within (25)"
    )
    p.add_argument("--check", action="store_true", help="exit 1 if the first sampler misses --target")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


class _Parser(argparse.ArgumentParser):
    """Reports a usage error as one line (UsageError) instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m tuner",
        description="Autotune the repkv backward kernel. Without a subcommand: tune.",
    )
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    _add_tune(sub)
    _add_variants(sub)
    _add_check(sub)
    _add_best(sub)
    _add_export(sub)
    _add_replay_eval(sub)
    _add_merge(sub)
    return parser


def _with_default_command(argv: list[str]) -> list[str]:
    if not argv:
        return ["tune"]
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help"):
        return argv
    return ["tune", *argv]


# --- commands -----------------------------------------------------------------------------
def cmd_variants(args: argparse.Namespace) -> int:
    shapes = parse_shape_values(args.shape or [LLMC_SHAPE])
    from tuner.report import render_variants

    render_variants(shapes, parse_dtypes(args.dtype))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    try:
        from tuner.check import main_check
    except ImportError as exc:
        print(f"error: the offline compile check is not available here ({exc})", file=sys.stderr)
        return 2
    return int(main_check(args, progress=show_progress(args)))


def cmd_best(args: argparse.Namespace) -> int:
    from tuner.report import render_winners, winners_table, write_winners

    dirs = [args.results] if args.results else read_dirs()
    frame, report = load_results(dirs)
    where = " and ".join(map(str, dirs))
    for path, why in report.skipped.items():
        print(f"skipped {path}: {why}", file=sys.stderr)
    if args.gpu:
        frame = frame[frame["gpu"] == args.gpu]
    if frame.empty:
        message = f"no trial rows under {where}" + (f" for GPU {args.gpu}" if args.gpu else "")
        print(message, file=sys.stdout if args.format == "table" else sys.stderr)
        if args.format != "table":  # an empty document, so that a reader's parser still works
            write_winners(winners_table(frame), args.format)
        return 1
    if args.format == "table":
        render_winners(winners_table(frame), title=f"Winners in {where}")
    else:
        write_winners(winners_table(frame), args.format)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tuner.export_cli import run_export

    return run_export(args, parse_dtypes(args.dtype), UsageError)


def cmd_replay_eval(args: argparse.Namespace) -> int:
    from tuner import replay_eval
    from tuner.replay import NoRecording

    samplers = _csv([args.samplers])
    for name in samplers:
        try:
            make_sampler(name, 0)
        except UnavailableSampler as exc:
            raise UsageError(str(exc)) from None
    frame = replay_eval.load(args.recording)
    if frame.empty:
        raise UsageError(f"no trial rows under {args.recording}: record a grid first (tune --sampler grid)")
    from tuner.report import CounterBar

    try:
        with CounterBar(show_progress(args), "replay-eval", "run") as bar:
            results = replay_eval.evaluate(
                frame, args.gpu, samplers, args.seeds, args.tolerance, args.max_trials, args.jobs, bar
            )
    except NoRecording as exc:
        raise UsageError(str(exc)) from None
    table = replay_eval.summary(results)
    with_pct = f"{args.tolerance:.0%}"
    print(f"trials to come within {with_pct} of the exhaustive optimum ({args.seeds} seeds; inf: never)")
    print(table.to_string(index=False))
    medians = replay_eval.overall_medians(results)
    for name in samplers:
        print(f"{name}: median {medians.get(name, float('inf')):g} trials")
    first = medians.get(samplers[0], float("inf"))
    verdict = "meets" if first <= args.target else "misses"
    print(f"{samplers[0]} {verdict} the target of {args.target:g} trials")
    return 1 if args.check and first > args.target else 0


def cmd_merge(args: argparse.Namespace) -> int:
    from tuner.merge import run_merge

    return run_merge(list(args.sources), args.output)


def tune_request(args: argparse.Namespace) -> TuneRequest:
    from tuner.pipeline import TuneRequest

    return TuneRequest(
        shapes=tuple(parse_shapes(args)),
        dtypes=tuple(parse_dtypes(args.dtype)),
        gpu=args.gpu,
        force_gpu_label=args.force_gpu_label,
        sampler=args.sampler,
        seed=args.seed,
        trials=args.trials,
        timeout_s=args.timeout,
        study=args.study,
        storage=args.storage,
        results_dir=args.results,
        replay_dir=args.replay,
        device=args.device,
        trial_timeout_s=args.trial_timeout,
        progress=show_progress(args),
        replay_delay_s=args.replay_delay,
        heartbeat_s=args.heartbeat,
        bundled=args.bundled,
    )


def cmd_fleet(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """--devices: a child process per device, then the winners of what they wrote."""
    from tuner.fleet import FleetError, run_fleet
    from tuner.report import render_winners, winners_table

    shapes, dtypes = parse_shapes(args), parse_dtypes(args.dtype)
    results = args.results if args.results is not None or args.replay else DEFAULT_RESULTS
    try:
        rc = run_fleet(
            argv,
            args.devices,
            replay=args.replay is not None,
            gpu=args.gpu,
            seed=args.seed,
            storage=args.storage,
            results=results,
        )
    except FleetError as exc:
        raise UsageError(str(exc)) from None
    if results is not None:
        frame, _ = load_results(results)
        if not frame.empty:
            keys = {s.key for s in shapes}
            shape_keys = frame.apply(lambda r: Shape(*(int(r[c]) for c in SHAPE_COLUMNS)).key, axis=1)
            frame = frame[shape_keys.isin(keys).to_numpy() & frame["dtype"].isin(dtypes).to_numpy()]
        render_winners(winners_table(frame), title=f"Winners in {results}")
    return rc


def cmd_tune(args: argparse.Namespace, runner: Runner | None = None, argv: Sequence[str] = ()) -> int:
    from tuner.interrupt import StopFlag, sigint_stops
    from tuner.pipeline import TuneError, tune

    if args.replay_delay < 0 or args.heartbeat < 1:
        raise UsageError("--replay-delay takes seconds >= 0 and --heartbeat seconds >= 1")
    if args.devices is not None:
        return cmd_fleet(args, argv)
    request = tune_request(args)
    stop = StopFlag()
    from tuner.fleet import watch_parent

    watch_parent(stop)
    with sigint_stops(stop):  # the report too: a second Ctrl-C while it prints still quits at once
        try:
            result = tune(request, runner, echo=lambda line: print(line, file=sys.stderr), stop=stop)
        except TuneError as exc:
            raise UsageError(str(exc)) from None
        return report_tune(result)


def report_tune(result: TuneResult) -> int:
    """What a tuning run prints at its end (interrupted or not); returns the exit status."""
    from tuner.fleet import in_fleet
    from tuner.report import render_outcomes, render_winners, winners_table

    render_outcomes(result.outcomes, file=sys.stderr)
    if result.missing:
        print(f"{result.missing} proposed configurations were not in the recording", file=sys.stderr)
    if not in_fleet():  # a fleet's parent shows the winners of all its workers
        render_winners(winners_table(result.frame()), title=f"Winners on {result.gpu}")
    if result.files:
        print(f"{result.rows} rows in {', '.join(str(f) for f in result.files)}", file=sys.stderr)
    if result.interrupted:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


Command = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, Command] = {
    "tune": cmd_tune,
    "variants": cmd_variants,
    "check": cmd_check,
    "best": cmd_best,
    "export": cmd_export,
    "replay-eval": cmd_replay_eval,
    "merge": cmd_merge,
}


def main(argv: Sequence[str] | None = None, *, runner: Runner | None = None) -> int:
    """The CLI. `runner` replaces the GPU runner (tests pass a fake one)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(_with_default_command(argv))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    commands = {**COMMANDS, "tune": functools.partial(cmd_tune, runner=runner, argv=argv)}
    try:
        return commands[args.command](args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
