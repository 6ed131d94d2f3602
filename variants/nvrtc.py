"""Offline compilation with NVRTC through cuda-bindings: no GPU and no driver needed.

Compiles the name expressions of one family into one program (many template instantiations
per NVRTC call), reads ptxas' resource report (registers, stack frame, spills) for every
kernel, and keeps the PTX so tests can read the instructions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

from variants.family import Family

CHUNK = 128  # name expressions per NVRTC program


class NvrtcUnavailable(RuntimeError):
    """cuda-bindings, NVRTC or the CUDA headers are not installed."""


@dataclass(frozen=True)
class KernelReport:
    expression: str
    ok: bool
    error: str = ""
    registers: int = -1
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    ptx: str = ""  # this kernel's .entry only

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


@cache
def _nvrtc():  # -> module
    try:
        import cuda.pathfinder as pathfinder
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise NvrtcUnavailable(
            "offline compilation needs cuda-bindings and NVRTC: pip install 'repkv-tune[nvrtc]'"
        ) from exc
    try:
        pathfinder.load_nvidia_dynamic_lib("nvrtc")
    except Exception as exc:
        raise NvrtcUnavailable(f"cannot load libnvrtc ({exc}); pip install 'repkv-tune[nvrtc]'") from exc
    return nvrtc


@cache
def include_options() -> tuple[str, ...]:
    import cuda.pathfinder as pathfinder

    dirs = []
    for header_lib in ("cudart", "cccl"):
        found = pathfinder.find_nvidia_header_directory(header_lib)
        if found is None:
            raise NvrtcUnavailable(
                f"CUDA headers for {header_lib} not found; pip install 'repkv-tune[nvrtc]'"
            )
        dirs.append(f"-I{found}")
    return tuple(dirs)


def nvrtc_version() -> str:
    nvrtc = _nvrtc()
    major, minor = _check(nvrtc.nvrtcVersion(), "version")
    return f"{major}.{minor}"


def _check(result: tuple, what: str):  # -> the call's value(s)
    nvrtc = _nvrtc()
    err, *values = result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what}: {err.name}")
    return values[0] if len(values) == 1 else values


def _log(program) -> str:
    nvrtc = _nvrtc()
    size = _check(nvrtc.nvrtcGetProgramLogSize(program), "log size")
    buf = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(program, buf), "log")
    return buf.decode(errors="replace").rstrip("\x00")


_ENTRY = re.compile(r"Compiling entry function '(\S+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


def parse_ptxas_log(log: str) -> dict[str, dict[str, int]]:
    """ptxas -v output -> {mangled name: {registers, stack, spill_store, spill_load}}."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = out.setdefault(m.group(1), {})
        elif current is not None and (m := _FRAME.search(line)):
            current.update(stack=int(m.group(1)), spill_store=int(m.group(2)), spill_load=int(m.group(3)))
        elif current is not None and (m := _REGS.search(line)):
            current["registers"] = int(m.group(1))
    return out


def split_ptx_entries(ptx: str) -> dict[str, str]:
    """PTX module text -> {mangled entry name: that entry's text}."""
    parts = re.split(r"(?=^(?:\.visible |\.weak )*\.entry )", ptx, flags=re.M)
    out = {}
    for part in parts[1:]:
        m = re.match(r"(?:\.visible |\.weak )*\.entry (\S+?)\(", part)
        if m:
            out[m.group(1)] = part
    return out


def compile_expressions(
    family: Family, expressions: Sequence[str], arch: str = "sm_90", keep_ptx: bool = False
) -> list[KernelReport]:
    """Compile the expressions of one family in one program; on failure, one by one."""
    nvrtc = _nvrtc()
    source = family.source.encode()
    options = [*family.compile_options, f"-arch={arch}", "-Xptxas=-v", *include_options()]
    program = _check(
        nvrtc.nvrtcCreateProgram(source, f"{family.name}.cu".encode(), 0, [], []), "create program"
    )
    try:
        for expression in expressions:
            _check(nvrtc.nvrtcAddNameExpression(program, expression.encode()), "add name expression")
        encoded = [o.encode() for o in options]
        (err,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        log = _log(program)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            if len(expressions) == 1:
                return [KernelReport(expressions[0], ok=False, error=log.strip()[-4000:])]
            return [r for e in expressions for r in compile_expressions(family, [e], arch, keep_ptx)]
        resources = parse_ptxas_log(log)
        entries: dict[str, str] = {}
        if keep_ptx:
            size = _check(nvrtc.nvrtcGetPTXSize(program), "PTX size")
            buf = b" " * size
            _check(nvrtc.nvrtcGetPTX(program, buf), "PTX")
            entries = split_ptx_entries(buf.decode(errors="replace"))
        reports = []
        for expression in expressions:
            lowered = _check(nvrtc.nvrtcGetLoweredName(program, expression.encode()), "lowered name")
            lowered = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
            info = resources.get(lowered, {})
            reports.append(
                KernelReport(
                    expression,
                    ok=True,
                    registers=info.get("registers", -1),
                    stack_bytes=info.get("stack", 0),
                    spill_store_bytes=info.get("spill_store", 0),
                    spill_load_bytes=info.get("spill_load", 0),
                    ptx=entries.get(lowered, ""),
                )
            )
        return reports
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def compile_all(
    work: Iterable[tuple[Family, str]],
    arch: str = "sm_90",
    keep_ptx: bool = False,
    threads: int = 0,
    on_done: Callable[[int], None] | None = None,
) -> list[KernelReport]:
    """Compile (family, expression) pairs, each distinct expression once, in parallel programs.
    `on_done(n)` is called (from a worker thread) as each program of n expressions is done."""
    by_family: dict[str, tuple[Family, list[str]]] = {}
    for family, expression in work:
        _, exprs = by_family.setdefault(family.name, (family, []))
        if expression not in exprs:
            exprs.append(expression)
    jobs = [
        (family, exprs[i : i + CHUNK])
        for family, exprs in by_family.values()
        for i in range(0, len(exprs), CHUNK)
    ]
    _nvrtc()
    import os

    workers = threads or min(len(jobs), os.cpu_count() or 1) or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        chunks = list(pool.map(lambda job: _compile_job(job, arch, keep_ptx, on_done), jobs))
    return [report for chunk in chunks for report in chunk]


def _compile_job(
    job: tuple[Family, list[str]], arch: str, keep_ptx: bool, on_done: Callable[[int], None] | None
) -> list[KernelReport]:
    reports = compile_expressions(job[0], job[1], arch, keep_ptx)
    if on_done is not None:
        on_done(len(job[1]))
    return reports
