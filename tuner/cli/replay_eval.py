"""`python -m tuner replay-eval`: the command around `tuner.study.replay_eval`.

On a terminal a bar shows the runs; elsewhere (a log, CI, `nohup`) a line now and then says
how far they are and about how long is left, so that a run of minutes is never silent.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TextIO

from tuner.cli.arguments import (
    UsageError,
    csv_values,
    nonnegative_fraction,
    positive_int,
    positive_number,
    show_progress,
)
from tuner.cli.defaults import AHEAD, DEFAULT_SAMPLERS
from tuner.run.gpus import gpu_label_argument
from tuner.runners.replay import bundled_note, no_rows, recording_dir
from variants.process_pool import usable_cores

PROGRESS_EVERY_S = 15.0  # between two progress lines


class ProgressLines:
    """`on_done(done, total)` as lines on standard error: one when the runs start, one at most
    every `every_s` seconds, one when they are done."""

    def __init__(
        self,
        file: TextIO | None = None,
        every_s: float = PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.file, self.every_s, self.clock = file, every_s, clock
        self.started = self.last = clock()

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done == 0:
            if total:
                self._say(f"replay-eval: {total} runs")
        elif done >= total or now - self.last >= self.every_s:
            elapsed = now - self.started
            line = f"replay-eval: {done}/{total} runs ({done / total:.0%}) in {elapsed:.0f} s"
            if done < total:
                line += f", about {elapsed / done * (total - done):.0f} s left"
            self._say(line)
        else:
            return
        self.last = now

    def _say(self, line: str) -> None:
        print(line, file=self.file or sys.stderr, flush=True)


def run_replay_eval(args: argparse.Namespace) -> int:
    from tuner.cli.report import CounterBar
    from tuner.runners.replay import NoRecording
    from tuner.study import replay_eval
    from tuner.study.samplers import UnavailableSampler, make_sampler

    samplers = list(dict.fromkeys(csv_values([args.samplers], "--samplers")))  # each once, in order
    for name in samplers:
        try:
            make_sampler(name.removesuffix(replay_eval.WARM), 0)
        except UnavailableSampler as exc:
            raise UsageError(str(exc)) from None
    frame = replay_eval.load(args.recording)
    if frame.empty:
        advice = f"record a grid first (tune --sampler grid), or {bundled_note('replay-eval bundled')}"
        raise UsageError(no_rows(args.recording, advice))
    bar_shown = show_progress(args)
    lines = ProgressLines() if not bar_shown and not args.no_progress else None
    try:
        with CounterBar(bar_shown, "replay-eval", "run") as bar:

            def on_done(done: int, total: int) -> None:
                bar(done, total)
                if lines is not None:
                    lines(done, total)

            results = replay_eval.evaluate(
                frame,
                args.gpu,
                samplers,
                args.seeds,
                args.tolerance,
                args.max_trials,
                args.jobs or usable_cores(),
                on_done,
                ahead=args.ahead,
            )
    except NoRecording as exc:
        raise UsageError(str(exc)) from None
    if not results:
        raise UsageError(
            f"no shape and dtype under {args.recording} holds every configuration of any family: "
            "record one first (tune --sampler grid, or --family NAME --sampler grid)"
        )
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


def add_replay_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "recording",
        type=recording_dir,
        metavar="DIR|bundled",
        help=f"a results directory holding exhaustive (grid) trials, or {bundled_note('bundled')}",
    )
    p.add_argument("--gpu", type=gpu_label_argument, help="GPU label (default: the recording's only one)")
    p.add_argument(
        "--samplers",
        default=",".join(DEFAULT_SAMPLERS),
        help=f"comma list; NAME+warm starts from the nearest recorded shapes, the evaluated one held out "
        f"(default {','.join(DEFAULT_SAMPLERS)})",
    )
    p.add_argument("--seeds", type=positive_int, default=20, help="seeds per shape and dtype (default 20)")
    p.add_argument(
        "--tolerance", type=nonnegative_fraction, default=0.02, help="distance to the optimum (default 0.02)"
    )
    p.add_argument(
        "--max-trials", type=positive_int, default=200, help="give up after this many (default 200)"
    )
    p.add_argument("--jobs", type=positive_int, help="processes (default: one per core)")
    p.add_argument(
        "--ahead",
        type=positive_int,
        default=AHEAD,
        metavar="N",
        help=f"trials asked at once, as tune does on a GPU (default {AHEAD})",
    )
    p.add_argument(
        "--target", type=positive_number, default=25, help="trials the first sampler must stay within (25)"
    )
    p.add_argument("--check", action="store_true", help="exit 1 if the first sampler misses --target")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
