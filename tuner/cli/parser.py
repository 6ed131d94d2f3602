"""The flags of `python -m tuner`: one parser per subcommand (SUBCOMMANDS), `tune` when none is
named, and the `tune` flags as a `TuneRequest`.

The values are read by `tuner.cli.arguments`; a usage error raises UsageError (one line, never an
exit), except --help, which prints and exits as argparse does. Nothing here imports CuPy.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from results.schema import DEFAULT_HOLD_US, L2_COLD, L2_STATES
from results.store import user_results_dir
from tuner.cli.arguments import (
    NO_BUNDLED_HELP,
    UsageError,
    csv_values,
    delay_seconds,
    directory,
    heartbeat_seconds,
    microseconds,
    nonempty,
    nonnegative_int,
    parse_dtypes,
    parse_shapes,
    positive_int,
    positive_seconds,
    results_alone_help,
    seed,
    show_progress,
    time_limit,
)
from tuner.cli.defaults import AHEAD, HEARTBEAT_S, WARM_START_SIZE
from tuner.cli.presets import DEFAULT_TRIALS, MODELS
from tuner.run.gpus import gpu_label_argument
from tuner.runners.replay import bundled_note, recording_dir
from tuner.study.samplers import SAMPLERS
from variants import DEFAULT_OP, OPS

if TYPE_CHECKING:
    from tuner.run.request import TuneRequest

DEFAULT_RESULTS = user_results_dir()
SCRIPT = "repkv-tune"  # the installed command ([project.scripts] in pyproject.toml)
MODULE_PROG = "python -m tuner"
LLMC_SHAPE = "B=8,T=1024,NH=32,NH_KV=8,HD=128"
BEST_FORMATS = ("table", "json", "csv")


def _add_tune(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="search the variants on this GPU (the default subcommand)",
        description="Search the kernel variants with Optuna; write every trial to parquet.",
    )
    g = p.add_argument_group("device")
    g.add_argument(
        "--gpu",
        type=gpu_label_argument,
        help="label to file results under (default: from the device name, e.g. h200)",
    )
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
        "--hold-us",
        type=microseconds,
        default=DEFAULT_HOLD_US,
        help="GPU-side wait after each L2 flush, so the timed call is queued before the GPU "
        "reaches it, as scripts/bench_kernels.py does (default %(default)g; 0: none); every row "
        "records it, and rows timed with another hold are measured again, not reused",
    )
    g.add_argument(
        "--l2",
        choices=L2_STATES,
        default=L2_COLD,
        help="what L2 holds when each timed call starts: cold (flushed, the default), or fed (flushed, "
        "then dout written, as attention's backward leaves it in a training step); rows record it, "
        "and each state is ranked and served apart (GET /best?l2=fed)",
    )
    g.add_argument(
        "--replay",
        type=recording_dir,
        metavar="DIR|bundled",
        help=f"answer trials from recorded rows (no GPU): a results directory, or {bundled_note('bundled')}",
    )
    g.add_argument(
        "--replay-delay",
        type=delay_seconds,
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
    o.add_argument(
        "--op",
        default=DEFAULT_OP,
        metavar="|".join(OPS),
        help=f"the kernel to tune (default {DEFAULT_OP})",
    )
    o.add_argument(
        "--family",
        action="append",
        metavar="NAME,..",
        help="search only these kernel families, repeatable or a comma list (default: all the GPU runs)",
    )
    o.add_argument(
        "--ahead",
        type=positive_int,
        default=AHEAD,
        metavar="N",
        help=f"trials asked at once, their kernels compiled together in parallel (default {AHEAD})",
    )
    o.add_argument(
        "--warm-start",
        type=nonnegative_int,
        default=WARM_START_SIZE,
        metavar="N",
        help=f"measure first the N best configurations of the nearest tuned shapes of this GPU "
        f"(default {WARM_START_SIZE}; 0: none)",
    )
    o.add_argument(
        "--remeasure",
        type=positive_int,
        default=0,
        metavar="N",
        help="run no study: measure again, together in one process, the N leaders stored for each shape "
        "and dtype (the fastest configuration of each of its N fastest families); they are then ranked "
        "by these times",
    )
    o.add_argument("--seed", type=seed, help="sampler seed (default: a fresh one, recorded in every row)")
    o.add_argument(
        "--storage",
        type=nonempty,
        help="Optuna storage: journal:FILE (default <results>/optuna.journal; the processes of one host), "
        "postgresql://... (several hosts), sqlite:///FILE (one process), or memory",
    )
    o.add_argument(
        "--heartbeat",
        type=heartbeat_seconds,
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


def _add_variants(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(name, help="list the kernel families, their parameters and valid configurations")
    p.add_argument(
        "--shape", action="append", metavar="B=..,T=..,NH=..,NH_KV=..,HD=..", help=f"default {LLMC_SHAPE}"
    )
    p.add_argument("--dtype", action="append", metavar="fp32,bf16,fp16", help="default: all three")
    p.add_argument(
        "--op", choices=list(OPS), default=DEFAULT_OP, help=f"the kernel's families (default {DEFAULT_OP})"
    )


def _add_check(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(name, help="compile every valid configuration offline with NVRTC (no GPU needed)")
    try:
        from tuner.cli.check import add_check_arguments
    except ImportError:
        p.add_argument("rest", nargs=argparse.REMAINDER)
        return
    add_check_arguments(p)


def _add_best(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="print the winners table of a results directory",
        epilog="exit status: 0 winners printed (unreadable files are skipped with a warning), "
        "1 no winners to print, 2 a usage error",
    )
    p.add_argument("--results", type=directory, metavar="DIR", help=results_alone_help(DEFAULT_RESULTS))
    p.add_argument("--no-bundled", dest="bundled", action="store_false", help=NO_BUNDLED_HELP)
    p.add_argument("--gpu", type=gpu_label_argument, help="only this GPU label")
    p.add_argument(
        "--op", choices=list(OPS), default=DEFAULT_OP, help=f"the kernel's winners (default {DEFAULT_OP})"
    )
    p.add_argument("--format", choices=BEST_FORMATS, default="table", help="table (default), json or csv")
    p.add_argument(
        "--l2",
        choices=L2_STATES,
        default=L2_COLD,
        help="the winners timed with L2 cold (default) or fed: fed lists only the shapes tuned so "
        "(export --l2 fed and the service keep the others' cold winners)",
    )


def _add_export(sub: argparse._SubParsersAction, name: str) -> None:
    from tuner.cli.export import add_export_arguments

    p = sub.add_parser(name, help="write one GPU's winners as a CUDA header for llm.c, or as JSON")
    add_export_arguments(p, DEFAULT_RESULTS)


def _add_replay_eval(sub: argparse._SubParsersAction, name: str) -> None:
    from tuner.cli.replay_eval import add_replay_eval_arguments

    p = sub.add_parser(
        name,
        help="trials each sampler needs to come within 2%% of the optimum, on exhaustive recordings",
    )
    add_replay_eval_arguments(p)


def _add_merge(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="copy the trial rows of several results directories into one, each row once",
        epilog="exit status: 0 every source file merged, 1 some could not be read (skipped and "
        "listed; the rest merged), 2 a usage error",
    )
    p.add_argument(
        "sources",
        nargs="+",
        type=recording_dir,
        metavar="DIR|bundled",
        help=f"results directories to read, or {bundled_note('bundled')}",
    )
    p.add_argument(
        "-o", "--output", type=directory, required=True, metavar="DIR", help="the directory to write"
    )


# Each subcommand's name and the function that adds its parser, in the order --help lists them.
SUBCOMMANDS: dict[str, Callable[[argparse._SubParsersAction, str], None]] = {
    "tune": _add_tune,
    "variants": _add_variants,
    "check": _add_check,
    "best": _add_best,
    "export": _add_export,
    "replay-eval": _add_replay_eval,
    "merge": _add_merge,
}


class _Parser(argparse.ArgumentParser):
    """Reports a usage error as one line (UsageError) instead of exiting. A flag no parser takes
    is reported by the subcommand's parser, so the line points at that subcommand's --help (where
    the flags are), not at the top level's list of subcommands."""

    commands: dict[str, argparse.ArgumentParser]

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = getattr(self, "commands", {}).get(getattr(parsed, "command", None), self)
            owner.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def program_name() -> str:
    """The command as it was started, for the usage and error lines: `repkv-tune` when run as the
    installed script, else `python -m tuner`."""
    started = Path(sys.argv[0]).name.removesuffix(".exe") if sys.argv and sys.argv[0] else ""
    return SCRIPT if started == SCRIPT else MODULE_PROG


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=program_name(),
        description="Autotune llm.c's GQA kernels (repkv backward unless --op). No subcommand: tune.",
    )
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(SUBCOMMANDS) + "}")
    for name, add_subcommand in SUBCOMMANDS.items():
        add_subcommand(sub, name)
    parser.commands = dict(sub.choices)
    return parser


def with_default_command(argv: Sequence[str]) -> list[str]:
    """The command line with `tune` in front unless it names a subcommand (or asks for --help)."""
    if not argv:
        return ["tune"]
    if argv[0] in SUBCOMMANDS or argv[0] in ("-h", "--help"):
        return list(argv)
    return ["tune", *argv]


def tune_request(args: argparse.Namespace) -> TuneRequest:
    """The parsed `tune` flags as the pipeline's request."""
    from tuner.run.request import TuneRequest

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
        hold_us=args.hold_us,
        l2=args.l2,
        progress=show_progress(args),
        replay_delay_s=args.replay_delay,
        heartbeat_s=args.heartbeat,
        bundled=args.bundled,
        warm_start=args.warm_start,
        ahead=args.ahead,
        op=args.op,
        families=tuple(dict.fromkeys(csv_values(args.family, "--family"))),
        remeasure=args.remeasure,
    )
