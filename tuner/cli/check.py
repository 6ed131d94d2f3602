"""`python -m tuner check`: compile every valid configuration with NVRTC, no GPU needed.

Prints, per architecture, family and dtype, how many kernels compiled, how many failed,
the largest register count and any spills; exits 1 if anything failed or spilled.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tuner.cli.arguments import (
    UsageError,
    file_path,
    output_file,
    parse_archs,
    parse_choices,
    parse_dtypes,
    parse_shape_values,
)
from variants import OPS, DType, Family, Shape, get_dtype

DEFAULT_ARCHS = ("sm_90", "sm_80")

# Shapes that reach every code path of the families: the seed shape, nrep = 1, NH_KV = 1,
# odd B*T with HD = 80 and 256, T = 1 with HD = 96, and one past 2^31 elements (64-bit indices).
CHECK_SHAPES = (
    Shape(8, 1024, 32, 8, 128),
    Shape(4, 512, 32, 32, 64),
    Shape(2, 333, 16, 1, 80),
    Shape(3, 7, 28, 4, 256),
    Shape(5, 1, 8, 2, 96),
    Shape(2, 65536, 64, 8, 128),
)


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    lists = "repeatable or a comma list"
    parser.add_argument(
        "--arch", action="append", metavar="sm_90,..", help=f"targets ({lists}; default sm_90,sm_80)"
    )
    parser.add_argument(
        "--shape",
        action="append",
        metavar="B=..,T=..,NH=..,NH_KV=..,HD=..",
        help="repeatable (default: shapes that reach every code path)",
    )
    parser.add_argument("--dtype", action="append", metavar="fp32,bf16,fp16", help=f"{lists}; default all")
    parser.add_argument("--family", action="append", metavar="vec,tile,..", help=f"{lists}; default all")
    parser.add_argument("--op", action="append", metavar=",".join(OPS), help=f"{lists}; default all")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--save-reports",
        type=file_path,
        metavar="FILE.parquet",
        help="also write every checked kernel's report (from the report cache) to this parquet file",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="compile every kernel, reading nothing from the report cache ($REPKV_NVRTC_CACHE; "
        "default ~/.cache/repkv-tune), nor writing to it",
    )


def main_check(args: argparse.Namespace, progress: bool = False) -> int:
    """The check of the parsed arguments; a bad one raises UsageError. `progress`: a bar on
    standard error per architecture."""
    from tuner.cli.report import CounterBar
    from variants.nvrtc import NvrtcUnavailable, compile_all, nvrtc_version, unsupported_arch

    archs = parse_archs(args.arch, DEFAULT_ARCHS)
    shapes = parse_shape_values(args.shape) or list(CHECK_SHAPES)
    dtypes = [get_dtype(d) for d in parse_dtypes(args.dtype)]
    ops = [OPS[o] for o in parse_choices(getattr(args, "op", None), list(OPS), "--op", list(OPS))]
    names = sorted({name for op in ops for name in op.families})
    chosen = set(parse_choices(args.family, names, "--family", names))
    families = [(op, family) for op in ops for name, family in op.families.items() if name in chosen]

    # (op, family, dtype) -> its distinct name expressions, in the order they were met
    work: dict[tuple[str, Family, DType], dict[str, None]] = {}
    rejected = valid = 0
    first_rejection = ""
    for shape in shapes:
        for dtype in dtypes:
            for op, family in families:
                for config in family.space():
                    reason = family.rejection(shape, dtype, config)
                    if reason:
                        rejected += 1
                        first_rejection = (
                            first_rejection or f"{op.name} {config.key} at {shape} {dtype.name}: {reason}"
                        )
                        continue
                    valid += 1
                    exprs = work.setdefault((op.name, family, dtype), {})
                    exprs[family.name_expression(shape, dtype, config)] = None
    if not valid:  # "0 failed, 0 spilled" would read as a pass
        raise UsageError(
            f"nothing to check: all {rejected} configurations are rejected (the first: {first_rejection})"
        )
    reports_file = getattr(args, "save_reports", None)
    if reports_file is not None:
        check_reports_file(reports_file)
    try:
        version = nvrtc_version()
        refused = [why for why in map(unsupported_arch, archs) if why]
    except NvrtcUnavailable as exc:  # one line on standard error, exit 2, as every usage error
        raise UsageError(str(exc)) from None
    if refused:  # else every kernel fails, and the failures would fill the report cache
        raise UsageError(refused[0])
    pairs = [(family, e) for (_, family, _), exprs in work.items() for e in exprs]
    kernels = len({e for _, e in pairs})
    print(
        f"NVRTC {version}: {valid} valid configurations over {len(shapes)} shapes "
        f"({rejected} rejected by constraints), {kernels} distinct kernels"
    )
    options = {"cache": False} if getattr(args, "no_cache", False) else {}
    if options.get("cache", True):
        from variants.compile_cache import default_cache

        cache = default_cache()
        seeded = cache.seed() if cache is not None else 0
        if seeded:
            print(f"the report cache took the {seeded} reports shipped with the package (toolchain-keyed)")
    failed = spilled = 0
    for arch in archs:
        start = time.perf_counter()
        with CounterBar(progress, f"{arch} compile", "kernel", total=kernels) as bar:
            found = compile_all(pairs, arch=arch, on_done=bar.advance, **options)
        reports = {r.expression: r for r in found}
        if reports_file is not None:
            saved = save_reports(pairs, arch, reports_file)
            print(f"{arch}: {saved} reports written to {reports_file}")
        elapsed = time.perf_counter() - start
        cached = sum(r.cached for r in found)
        from_cache = f" ({cached} from the report cache)" if cached else ""
        print(f"\n{arch}: {len(reports)} kernels in {elapsed:.1f} s{from_cache}")
        head = f"{'op':<19} {'family':<14} {'dtype':<5} {'kernels':>7} {'failed':>6} {'max regs':>8}"
        print(f"  {head} {'spills':>6}")
        for op, family in families:
            for dtype in dtypes:
                exprs = work.get((op.name, family, dtype))
                if not exprs:
                    continue
                rows = [reports[e] for e in exprs]
                bad = [r for r in rows if not r.ok]
                spills = [r for r in rows if r.ok and (r.spills or r.stack_bytes)]
                regs = max((r.registers for r in rows if r.ok), default=-1)
                counts = f"{len(rows):>7} {len(bad):>6} {regs:>8} {len(spills):>6}"
                print(f"  {op.name:<19} {family.name:<14} {dtype.name:<5} {counts}")
                for r in bad[:3]:
                    print(f"    FAILED {r.expression}: {r.error.splitlines()[0] if r.error else ''}")
                for r in spills[:3]:
                    print(
                        f"    SPILLS {r.expression}: {r.spill_store_bytes} B stores, "
                        f"{r.spill_load_bytes} B loads, {r.stack_bytes} B stack"
                    )
                failed += len(bad)
                spilled += len(spills)
    print(f"\n{failed} failed, {spilled} spilled")
    return 1 if failed or spilled else 0


def check_reports_file(path: Path) -> None:
    """--save-reports, before anything compiles: a file that can be written and, if it is there
    already (its reports are kept), a report file."""
    from variants.compile_cache import ReportCache

    output_file(path, "--save-reports")
    if path.exists():
        try:
            ReportCache.read_file(path)
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise UsageError(
                f"--save-reports {path} is not a report file ({str(exc).splitlines()[0]}): "
                "name a new file, or one that check --save-reports wrote"
            ) from None


def save_reports(pairs: list[tuple[Family, str]], arch: str, path: Path) -> int:
    """Append the report cache's reports of these kernels for `arch` to `path` (parquet): the
    file `variants/data/nvrtc-reports.parquet` ships (variants.compile_cache.SHIPPED_REPORTS)."""
    from results.writing import write_parquet
    from variants.compile_cache import ReportCache, default_cache
    from variants.nvrtc import report_keys

    cache = default_cache()
    if cache is None:
        raise UsageError("--save-reports reads the report cache, which $REPKV_NVRTC_CACHE turns off")
    keys = report_keys(pairs, arch)
    reports = cache.get_many(keys)
    earlier = ReportCache.read_file(path) if path.exists() else {}
    table = ReportCache.table({**earlier, **reports})
    write_parquet(table, path, compression="zstd", compression_level=19)  # a killed run leaves the old file
    return len(reports)
