"""`python -m tuner export`: one GPU's winners of every op as one drop-in CUDA header for llm.c
(`llmc/repkv.cuh`'s repkv_forward and repkv_backward, and the fused rope_repkv_forward and
repkv_rope_backward; an op without results gets its generic configuration), or as JSON (per op).

python -m tuner export --format cuda-header --gpu h200 --dtype bf16 -o repkv_tuned.cuh
python -m tuner export --format json --gpu h200
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import variants
from results.header import ExportError, export_header
from results.header_render import render_header
from results.index import build_index
from results.schema import L2_COLD, L2_STATES
from results.store import load_results
from results.writing import write_text
from tuner.cli.arguments import NO_BUNDLED_HELP, file_path, output_file, results_alone_help, results_to_read
from tuner.run.gpus import gpu_label_argument

FORMATS = ("cuda-header", "json")


def add_export_arguments(parser: argparse.ArgumentParser, default_results: Path) -> None:
    parser.add_argument("--format", choices=FORMATS, default="cuda-header", help="default cuda-header")
    parser.add_argument("--gpu", type=gpu_label_argument, help="GPU label (default: the results' only one)")
    parser.add_argument("--dtype", action="append", metavar="fp32,bf16,fp16", help="default: all three")
    parser.add_argument(
        "--other-gpus", action="store_true", help="a GPU without results gets another GPU's winners"
    )
    parser.add_argument(
        "--l2",
        choices=L2_STATES,
        default=L2_COLD,
        help="the winners tuned with L2 cold (default) or fed (python -m tuner --l2 fed: dout just "
        "written, as in a training step); shapes never tuned fed keep their cold ones",
    )
    parser.add_argument("--results", type=Path, metavar="DIR", help=results_alone_help(default_results))
    parser.add_argument("--no-bundled", dest="bundled", action="store_false", help=NO_BUNDLED_HELP)
    parser.add_argument("-o", "--output", type=file_path, help="file to write (default: standard output)")


def run_export(args: argparse.Namespace, dtypes: list[str], usage_error: type[Exception]) -> int:
    if args.output is not None:  # said before the results are read
        output_file(args.output, "-o")
    dirs = results_to_read(args.results, bundled=args.bundled)
    frame, report = load_results(dirs)  # each file skipped, or row dropped, is logged once as it loads
    index = build_index(frame, report)
    gpu = args.gpu
    if gpu is None:
        gpus = sorted({g for op in variants.OPS for g in index.for_op(op).available_gpus()})
        if not gpus:  # nothing to pick from: --gpu would not help
            missing = f" ({' and '.join(report.missing)}: no such directory)" if report.missing else ""
            raise usage_error(f"no trial rows under {' and '.join(map(str, dirs))}{missing}")
        if len(gpus) != 1:
            raise usage_error(f"the results hold GPUs {', '.join(gpus)}: pick one with --gpu")
        gpu = gpus[0]
    try:
        export = export_header(index, gpu, dtypes, other_gpus=args.other_gpus, l2=args.l2)
    except ExportError as exc:
        raise usage_error(f"{exc} (in {' and '.join(map(str, dirs))})") from None
    text = render_header(export) if args.format == "cuda-header" else export.as_json() + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        write_text(text, args.output)  # a temporary of its own beside it, removed on failure
    except OSError as exc:
        raise usage_error(f"cannot write {args.output}: {exc.strerror or exc}") from None
    counts = ", ".join(f"{op} {len(table.rows)}" for op, table in export.tables.items())
    total = sum(len(table.rows) for table in export.tables.values())
    print(f"{total} tuned shapes of {gpu} written to {args.output} ({counts})", file=sys.stderr)
    return 0
