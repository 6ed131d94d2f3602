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

This module dispatches (COMMANDS) and renders. The flags live in `tuner.cli.parser`, the reading
of their values in `tuner.cli.arguments`, tuning in `tuner.run.pipeline.tune` (its request in
`tuner.run.request`). Usage errors print one line that says what to do and return 2.
Nothing here imports CuPy until a GPU is actually asked for.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from results.schema import L2_COLD, SHAPE_COLUMNS, ops_of, rows_of_op
from results.store import load_results
from tuner.cli.arguments import (
    UsageError,
    parse_dtypes,
    parse_shape_values,
    parse_shapes,
    results_to_read,
    show_progress,
)
from tuner.cli.parser import DEFAULT_RESULTS, LLMC_SHAPE, build_parser, tune_request, with_default_command
from tuner.interrupt import EXIT_INTERRUPTED
from tuner.runners.runner import Runner
from variants import DEFAULT_OP, Shape, get_op

if TYPE_CHECKING:
    import pandas as pd

    from tuner.run.request import TuneResult


def cmd_variants(args: argparse.Namespace) -> int:
    shapes = parse_shape_values(args.shape or [LLMC_SHAPE])
    from tuner.cli.report import render_variants

    render_variants(shapes, parse_dtypes(args.dtype), op=args.op)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    try:
        from tuner.cli.check import main_check
    except ImportError as exc:
        print(f"error: the offline compile check is not available here ({exc})", file=sys.stderr)
        return 2
    return int(main_check(args, progress=show_progress(args)))


def state_note(l2: str) -> str:
    """What a winners table's title says of its L2 state: nothing for the default, cold."""
    return "" if l2 == L2_COLD else f" (L2 {l2})"


def _no_winners(args: argparse.Namespace, where: str, frame: pd.DataFrame, every_op: pd.DataFrame) -> str:
    """Why `best` has no winners to show: no rows timed in the L2 state asked, rows of other
    ops alone (which, and how to see them), or no rows at all."""
    of_op = "" if args.op == DEFAULT_OP else f" of {args.op}"
    for_gpu = f" for GPU {args.gpu}" if args.gpu else ""
    if not frame.empty:  # rows, none timed in that state: not "no correct measurement"
        return (
            f"no winners{of_op} timed with L2 {args.l2} under {where}{for_gpu} "
            f"(python -m tuner --l2 {args.l2} tunes them; leave --l2 out for the L2-cold winners)"
        )
    if args.gpu and not every_op.empty:
        every_op = every_op[every_op["gpu"] == args.gpu]
    others = sorted(set(ops_of(every_op)) - {args.op})
    if not others:
        return f"no trial rows{of_op} under {where}{for_gpu}"
    held = f"{', '.join(others)} (--op {others[0]})"
    if args.gpu:
        return f"GPU {args.gpu} has no trial rows of {args.op} under {where}, only rows of {held}"
    return f"no trial rows of {args.op} under {where}; they hold {held}"


def cmd_best(args: argparse.Namespace) -> int:
    from tuner.cli.report import render_winners, winners_table, write_winners

    dirs = results_to_read(args.results, bundled=args.bundled)
    frame, _ = load_results(dirs)  # each file skipped, or row dropped, is logged once as it loads
    where = " and ".join(map(str, dirs))
    every_op, frame = frame, rows_of_op(frame, args.op)
    if args.gpu:
        held = sorted(set(every_op["gpu"]))
        if held and args.gpu not in held:  # a GPU label the results do not have: a usage error
            raise UsageError(
                f"no results for GPU '{args.gpu}'; the results hold {', '.join(held)} (in {where})"
            )
        frame = frame[frame["gpu"] == args.gpu]
    table = winners_table(frame, args.l2)
    if frame.empty or (table.empty and args.l2 != L2_COLD):
        # on stderr in every format: `best > winners.txt` keeps an empty table, not the message
        print(_no_winners(args, where, frame, every_op), file=sys.stderr)
        if args.format != "table":  # an empty document, so that a reader's parser still works
            write_winners(table, args.format)
        return 1
    if args.format == "table":
        of_op = "" if args.op == DEFAULT_OP else f" ({args.op})"
        title = f"Winners{of_op} in {where}{state_note(args.l2)}"
        render_winners(table, title=title, baseline=get_op(args.op).baseline_name)
    else:
        write_winners(table, args.format)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tuner.cli.export import run_export

    return run_export(args, parse_dtypes(args.dtype), UsageError)


def cmd_replay_eval(args: argparse.Namespace) -> int:
    from tuner.cli.replay_eval import run_replay_eval

    return run_replay_eval(args)


def cmd_merge(args: argparse.Namespace) -> int:
    from tuner.cli.merge import run_merge

    return run_merge(list(args.sources), args.output)


def cmd_fleet(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """--devices: a child process per device, then the winners of what they wrote."""
    from tuner.cli.report import render_winners, winners_table
    from tuner.run.fleet import FleetError, run_fleet

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
        render_winners(winners_table(frame, args.l2), title=f"Winners in {results}{state_note(args.l2)}")
    return rc


def cmd_tune(args: argparse.Namespace, runner: Runner | None = None, argv: Sequence[str] = ()) -> int:
    from tuner.interrupt import StopFlag, sigint_stops
    from tuner.run.pipeline import tune
    from tuner.run.request import TuneError

    if args.devices is not None:
        return cmd_fleet(args, argv)
    request = tune_request(args)
    stop = StopFlag()
    from tuner.run.fleet import watch_parent

    watch_parent(stop)
    # Ctrl-C quits at once until trials run (nothing to finish), stops after the current trial while
    # they do, and quits at once again while the report prints
    with sigint_stops(stop, at_once_outside=True):
        try:
            result = tune(request, runner, echo=lambda line: print(line, file=sys.stderr), stop=stop)
        except TuneError as exc:
            raise UsageError(str(exc)) from None
        return report_tune(result)


def report_tune(result: TuneResult) -> int:
    """What a tuning run prints at its end (interrupted or not); returns the exit status."""
    from tuner.cli.report import render_outcomes, render_winners, winners_table
    from tuner.run.fleet import in_fleet

    render_outcomes(result.outcomes, file=sys.stderr)
    if result.missing:
        print(f"{result.missing} proposed configurations were not in the recording", file=sys.stderr)
    if not in_fleet():  # a fleet's parent shows the winners of all its workers
        title = f"Winners on {result.gpu}{state_note(result.l2)}"
        frame = result.frame()
        ops = set(ops_of(frame)) if len(frame) else set()
        baseline = get_op(ops.pop()).baseline_name if len(ops) == 1 else "llm.c"
        render_winners(winners_table(frame, result.l2), title=title, baseline=baseline)
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
        args = parser.parse_args(with_default_command(argv))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from tuner.cli.extra import TUNING_COMMANDS, unmet

    # tuning needs the tuner extra; the commands that read results do not
    problem = unmet(args.command, parser.prog)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.command in TUNING_COMMANDS:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
    commands = {**COMMANDS, "tune": functools.partial(cmd_tune, runner=runner, argv=argv)}
    try:
        return commands[args.command](args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
