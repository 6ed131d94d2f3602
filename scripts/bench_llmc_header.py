"""The exported llm.c header on a GPU: export it, build `results/header_harness.cu` with nvcc
(as llm.c's dev/cuda programs are built), then, for every op of the header (or `--op`), validate
and time every tuned shape and a few untuned ones per dtype against llm.c's own kernels at block
128 (repkv kernel1, chained with llm.c's RoPE kernel for the fused ops) and a device copy.

    python scripts/bench_llmc_header.py --gpu h200 --out DIR [--op repkv_forward,...]

Output: `header_harness.md` in `--out` (default `docs/runs/`), the table printed as it runs; the
header and the harness binary are built in a temporary directory. The table of docs/header.md
comes from its H200 run, `docs/runs/h200_llmc_header.md` and `.log`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"  # where the runs behind the shipped tables are kept
sys.path.insert(0, str(ROOT))

import variants  # noqa: E402
from results.header import export_header  # noqa: E402
from results.header_render import render_header  # noqa: E402
from results.index import build_index  # noqa: E402
from results.store import load_results, read_dirs  # noqa: E402

# Never tuned: a tuned layout at other B*T (nearest rule), and layouts nobody tuned (generic).
UNTUNED = ["3,1000,32,8,128", "2,512,28,4,128", "6,4096,14,2,64", "1,777,12,4,72", "5,333,40,8,80"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--op", default=",".join(variants.OPS), help="comma list (default: every op)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="repkv-header-") as build_dir:
        return run(args, Path(build_dir))


def run(args: argparse.Namespace, build_dir: Path) -> int:
    ops = [variants.get_op(name.strip()).name for name in args.op.split(",") if name.strip()]
    export = export_header(build_index(load_results(read_dirs())[0]), args.gpu)
    header = build_dir / "repkv_tuned.cuh"
    header.write_text(render_header(export))
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    binary = build_dir / "harness"
    build = [nvcc, "-O3", "-std=c++17", f"-arch={args.arch}", "-Xcompiler", "-fopenmp", f"-I{build_dir}"]
    subprocess.run([*build, str(ROOT / "results" / "header_harness.cu"), "-o", str(binary)], check=True)
    lines: list[str] = []
    failed = False
    for op in ops:
        table = export.tables[op]
        for dtype in ("fp32", "bf16", "fp16"):
            shapes = [
                f"{int(s[0])},{int(s[1])},{r.NH},{r.NH_KV},{r.HD}"
                for r in table.rows
                if r.dtype == dtype
                for s in [[v.split("=")[1] for v in r.tuned_shape.split(",")[:2]]]
            ]
            run = subprocess.run(
                [str(binary), "--op", op, dtype, *shapes, *UNTUNED], capture_output=True, text=True
            )
            sys.stderr.write(run.stderr)
            out = run.stdout.splitlines()
            print("\n".join(out if not lines else out[2:]), flush=True)
            lines += out if not lines else out[2:]
            failed |= run.returncode != 0
    (args.out / "header_harness.md").write_text("\n".join(lines) + "\n")
    print(f"untuned shapes: {', '.join(UNTUNED)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
