"""Offline compilation with NVRTC through cuda-bindings: no GPU and no driver needed.

Many template instantiations go into one NVRTC program (its name expressions); `compile_all`
compiles each distinct (source, options, expression) once, in programs spread over worker
processes, one per core (`variants.process_pool`). For every kernel it reads ptxas' resource
report (registers, stack frame, spills), and on request keeps the PTX so tests can read the
instructions.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from variants.compile_cache import ReportCache, default_cache
from variants.errors import RepkvTuneError
from variants.family import Family
from variants.process_pool import in_processes, usable_cores

# The most name expressions in one NVRTC program: the header is parsed once per program (about
# 60 ms of CPU), each kernel then costs 30-100 ms, so 32 spends under 5% on headers while the
# programs stay short enough to spread evenly over the workers.
CHUNK = 32


class NvrtcUnavailable(RepkvTuneError, RuntimeError):
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
    cached: bool = False  # read from the report cache, not compiled in this run

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


@dataclass(frozen=True)
class Program:
    """One NVRTC program: plain data, so that it travels to a worker process."""

    name: str  # the family; NVRTC names the file <name>.cu in its messages
    source: str
    options: tuple[str, ...]  # the family's compile options (the arch and includes are added)
    expressions: tuple[str, ...]


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
    return tuple(f"-I{d}" for d in _header_dirs())


@cache
def _header_dirs() -> tuple[str, ...]:
    import cuda.pathfinder as pathfinder

    dirs = []
    for header_lib in ("cudart", "cccl"):
        found = pathfinder.find_nvidia_header_directory(header_lib)
        if found is None:
            raise NvrtcUnavailable(
                f"CUDA headers for {header_lib} not found; pip install 'repkv-tune[nvrtc]'"
            )
        dirs.append(found)
    return tuple(dirs)


def nvrtc_version() -> str:
    nvrtc = _nvrtc()
    major, minor = _check(nvrtc.nvrtcVersion(), "version")
    return f"{major}.{minor}"


@cache
def supported_archs() -> tuple[int, ...]:
    """The compute capabilities this NVRTC compiles for (75, 80, ..., as 10 * major + minor)."""
    return tuple(_check(_nvrtc().nvrtcGetSupportedArchs(), "supported architectures"))


def unsupported_arch(arch: str) -> str | None:
    """Why NVRTC cannot compile for `arch` (sm_90, compute_90a, ...), or None if it can."""
    number = int(re.sub(r"\D", "", arch))
    supported = supported_archs()
    if number in supported:
        return None
    targets = ", ".join(f"sm_{a}" for a in supported)
    return f"NVRTC {nvrtc_version()} does not compile for {arch} (it does for: {targets})"


@cache
def toolchain() -> str:
    """What, besides the program, decides NVRTC's output: its version, and the contents of its
    library and of the header directories it includes, as one line for the report cache's keys.
    Contents, not paths or times: the same toolchain installed on another machine gives the
    same line, so that reports made there (a shipped report file) stay valid here."""
    import cuda.pathfinder as pathfinder

    _nvrtc()
    library = Path(pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path)
    digest = hashlib.sha256()
    files = [library.resolve()]
    for directory in map(Path, _header_dirs()):
        files += sorted(p for p in directory.rglob("*") if p.is_file())
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return f"{nvrtc_version()}|{digest.hexdigest()}"


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
    """Compile the expressions of one family in one program (in this process)."""
    program = Program(family.name, family.source, family.compile_options, tuple(expressions))
    return compile_program(program, arch, keep_ptx)


def compile_program(program: Program, arch: str = "sm_90", keep_ptx: bool = False) -> list[KernelReport]:
    """One NVRTC call for all of the program's expressions. If it fails, the halves are
    compiled apart, down to single expressions, so each failure is reported with its log."""
    nvrtc = _nvrtc()
    expressions = program.expressions
    options = [*program.options, f"-arch={arch}", "-Xptxas=-v", *include_options()]
    handle = _check(
        nvrtc.nvrtcCreateProgram(program.source.encode(), f"{program.name}.cu".encode(), 0, [], []),
        "create program",
    )
    try:
        for expression in expressions:
            _check(nvrtc.nvrtcAddNameExpression(handle, expression.encode()), "add name expression")
        encoded = [o.encode() for o in options]
        (err,) = nvrtc.nvrtcCompileProgram(handle, len(encoded), encoded)
        log = _log(handle)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            if len(expressions) == 1:
                return [KernelReport(expressions[0], ok=False, error=log.strip()[-4000:])]
            half = len(expressions) // 2
            return [
                report
                for part in (expressions[:half], expressions[half:])
                for report in compile_program(replace(program, expressions=part), arch, keep_ptx)
            ]
        resources = parse_ptxas_log(log)
        entries: dict[str, str] = {}
        if keep_ptx:
            size = _check(nvrtc.nvrtcGetPTXSize(handle), "PTX size")
            buf = b" " * size
            _check(nvrtc.nvrtcGetPTX(handle, buf), "PTX")
            entries = split_ptx_entries(buf.decode(errors="replace"))
        reports = []
        for expression in expressions:
            lowered = _check(nvrtc.nvrtcGetLoweredName(handle, expression.encode()), "lowered name")
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
        nvrtc.nvrtcDestroyProgram(handle)


def plan_programs(work: Iterable[tuple[Family, str]], chunk: int = CHUNK) -> list[Program]:
    """The programs that compile `work`: each distinct (source, options, expression) once, even
    when several shapes give a configuration the same expression, at most `chunk` a program."""
    groups: dict[tuple[str, str, tuple[str, ...]], dict[str, None]] = {}
    for family, expression in work:
        key = (family.name, family.source, family.compile_options)
        groups.setdefault(key, {})[expression] = None
    return [
        Program(name, source, options, tuple(exprs)[i : i + chunk])
        for (name, source, options), exprs in groups.items()
        for i in range(0, len(exprs), chunk)
    ]


def report_keys(work: Iterable[tuple[Family, str]], arch: str) -> list[str]:
    """The report cache's key of each distinct kernel of `work` for `arch`, as `compile_all` keys them."""
    keys = []
    for program in plan_programs(work):
        digest = ReportCache.program_digest(toolchain(), arch, program.options, program.source)
        keys += [ReportCache.key(digest, e) for e in program.expressions]
    return keys


def compile_all(
    work: Iterable[tuple[Family, str]],
    arch: str = "sm_90",
    keep_ptx: bool = False,
    workers: int = 0,
    on_done: Callable[[int], None] | None = None,
    chunk: int = CHUNK,
    cache: ReportCache | bool = True,
) -> list[KernelReport]:
    """Compile (family, expression) pairs: one report per distinct expression, in the order
    first met. The programs run in `workers` processes (default: one per usable core, none
    for a single program); `on_done(n)` is called in this process as n more are known.
    `cache`: True for the user's report cache (`variants.compile_cache`), a `ReportCache`, or
    False; reports with PTX are neither read from nor written to it."""
    programs = plan_programs(work, chunk)
    if not programs:
        return []
    _nvrtc()
    store = None if keep_ptx or cache is False else default_cache() if cache is True else cache
    reports: dict[tuple[str, tuple[str, ...], str], KernelReport] = {}
    digests: dict[Program, str] = {}

    def key(program: Program, expression: str) -> str:
        assert store is not None
        if program not in digests:
            digests[program] = store.program_digest(toolchain(), arch, program.options, program.source)
        return store.key(digests[program], expression)

    todo = programs
    if store is not None:
        found = store.get_many([key(p, e) for p in programs for e in p.expressions])
        todo = []
        for program in programs:
            hits = {e: found[key(program, e)] for e in program.expressions if key(program, e) in found}
            for expression, fields in hits.items():
                reports[program.source, program.options, expression] = KernelReport(
                    expression, cached=True, **fields
                )
            if hits and on_done is not None:
                on_done(len(hits))
            missing = tuple(e for e in program.expressions if e not in hits)
            if missing:
                todo.append(replace(program, expressions=missing))

    for program, compiled in _run(todo, arch, keep_ptx, workers or usable_cores()):
        for report in compiled:
            reports[program.source, program.options, report.expression] = report
        if store is not None:
            store.put_many({key(program, r.expression): cached_fields(r) for r in compiled})
        if on_done is not None:
            on_done(len(compiled))
    return [reports[p.source, p.options, e] for p in programs for e in p.expressions]


def cached_fields(report: KernelReport) -> dict[str, object]:
    """What the report cache keeps of a report: all but the expression (its key) and the PTX."""
    return {
        "ok": report.ok,
        "error": report.error,
        "registers": report.registers,
        "stack_bytes": report.stack_bytes,
        "spill_store_bytes": report.spill_store_bytes,
        "spill_load_bytes": report.spill_load_bytes,
    }


def _run(
    programs: list[Program], arch: str, keep_ptx: bool, workers: int
) -> Iterator[tuple[Program, list[KernelReport]]]:
    """(program, its reports) as each is compiled, over `workers` processes
    (`variants.process_pool.in_processes`)."""
    jobs = [(program, arch, keep_ptx) for program in programs]
    return in_processes(_compile_job, jobs, workers, warm=_nvrtc)


def _compile_job(job: tuple[Program, str, bool]) -> tuple[Program, list[KernelReport]]:
    program, arch, keep_ptx = job
    return program, compile_program(program, arch, keep_ptx)
