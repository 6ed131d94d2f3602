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

from tuner.cli.arguments import UsageError, csv_values, show_progress
from tuner.runners.replay import bundled_note, no_rows

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
                args.jobs or replay_eval.cores(),
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
