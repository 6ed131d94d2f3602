"""GPU conformance of the ops beyond repkv backward (repkv_forward and the fused RoPE pair):
every family x dtype x a sample of its configurations (every block size, vector width, words
a thread, replica group and items a thread)
on shapes that reach every code path, each launch validated element by element against the
op's float64 reference (fresh random input, llm.c's freqs_cis, output poisoned with NaN)."""

from __future__ import annotations

import random

import pytest

from variants import DTYPES, OPS, Config, DType, Op, Shape

pytestmark = pytest.mark.gpu

NEW_OPS = [op for name, op in OPS.items() if name != "repkv_backward"]
SHAPES = {
    "seed": Shape(8, 1024, 32, 8, 128),
    "mha": Shape(4, 256, 32, 32, 64),
    "mha_hd96_odd_bt": Shape(3, 77, 12, 12, 96),
    "mha_hd34": Shape(1, 5, 5, 5, 34),
    "mqa": Shape(2, 128, 16, 1, 128),
    "hd80": Shape(2, 96, 32, 8, 80),
    "hd96_nrep7": Shape(3, 50, 28, 4, 96),
    "hd256": Shape(2, 64, 16, 8, 256),
    "t1": Shape(1, 1, 32, 8, 128),
    "odd_bt": Shape(3, 333, 8, 2, 64),
    "hd34": Shape(5, 3, 12, 3, 34),
    "nrep16_hd8": Shape(3, 5, 32, 2, 8),
}
# More than 2^31 output elements of (B, T, 3, NH, HD) in bf16 (6.4 GB): 64-bit indices; the
# fused backward's rotate_runtime (nrep 1 only) at an MHA layout of as many (4.8 GB each way).
HUGE = Shape(2, 65536, 64, 8, 128)
HUGE_MHA = Shape(2, 65536, 48, 48, 128)


def sample(op: Op, shape: Shape, dtype: DType) -> list[Config]:
    """For every family: one random valid configuration per block size, vector width, count
    of words a thread, replica group, items a thread and K/V items a thread, plus the baseline."""
    rng = random.Random(f"{op.name}-{shape}-{dtype.name}")
    picked: list[Config] = []
    for family in op.families.values():
        valid = family.valid_configs(shape, dtype)
        for axis in ("block", "vec_bytes", "words", "group", "items", "kv_items", "tail"):
            for value in sorted({c.values[axis] for c in valid if axis in c.values}):
                choice = rng.choice([c for c in valid if c.values[axis] == value])
                if choice not in picked:
                    picked.append(choice)
    baseline = op.families[op.baseline.family]
    if op.baseline not in picked and baseline.rejection(shape, dtype, op.baseline) is None:
        picked.append(op.baseline)
    return picked


CASES = [
    pytest.param(op, shape, DTYPES[dtype], config, id=f"{op.name}-{name}-{dtype}-{config.key}")
    for op in NEW_OPS
    for name, shape in SHAPES.items()
    for dtype in DTYPES
    for config in sample(op, shape, DTYPES[dtype])
]


@pytest.fixture(scope="module")
def sessions():
    from tuner.runners.gpu.session import DeviceSession

    made = {op.name: DeviceSession(families=op.families, reps=5) for op in NEW_OPS}
    for op in NEW_OPS:
        work = [
            (op.families[c.family], op.families[c.family].name_expression(shape, dtype, c))
            for o, shape, dtype, c in (p.values for p in CASES)
            if o is op
        ]
        made[op.name].kernels.prepare(work, threads=16)
    yield made
    for session in made.values():
        session.release()


@pytest.mark.parametrize(("op", "shape", "dtype", "config"), CASES)
def test_configuration_is_correct(sessions, op: Op, shape: Shape, dtype: DType, config: Config) -> None:
    session = sessions[op.name]
    assert session.op is op
    result = session.run_checked(shape, dtype, session.launcher(shape, dtype, config))
    assert result.ok, result.summary()


HUGE_CONFIGS = (
    Config.of("vec", block=256, vec_bytes=16, load="ldcs", store="stcs"),
    Config.of("flat", block=256, vec_bytes=16, words=2, load="ldcs", store="stcs"),
    Config.of("flat_runtime", block=256, vec_bytes=16, words=2, load="ldcs", store="stcs"),
    Config.of("split", block=256, vec_bytes=16, items=4, load="ldcs", store="stcs"),
    Config.of("split_runtime", block=256, vec_bytes=16, items=4, kv_items=2, load="ldcs", store="stcs"),
    Config.of("rotate_runtime", block=256, vec_bytes=16, words=2, load="ldcs", store="stcs"),
    Config.of("warp_sum", block=256, vec_bytes=16, items=4, load="ldcs", store="stcs", tail=4),
    Config.of("warp_sum_runtime", block=256, vec_bytes=16, items=4, load="ldcs", store="stcs", tail=2),
)


@pytest.mark.parametrize("config", HUGE_CONFIGS, ids=lambda c: c.family)
@pytest.mark.parametrize("op", NEW_OPS, ids=lambda op: op.name)
def test_more_than_2_31_elements_in_bf16(sessions, op: Op, config: Config) -> None:
    if config.family not in op.families:
        pytest.skip(f"{op.name} has no {config.family}")
    family = op.families[config.family]
    # the fused backward's flat also takes how many replicas it loads together
    if "group" in {param.name for param in family.params}:
        config = Config.of(config.family, **config.values, group=4)
    bf16 = DTYPES["bf16"]
    session = sessions[op.name]
    shape = HUGE_MHA if config.family == "rotate_runtime" else HUGE
    assert "long long" in family.name_expression(shape, bf16, config)
    result = session.run_checked(shape, bf16, session.launcher(shape, bf16, config))
    session.release()
    assert result.ok, result.summary()


@pytest.mark.parametrize("op", NEW_OPS, ids=lambda op: op.name)
def test_the_validator_catches_a_launch_that_writes_nothing(sessions, op: Op) -> None:
    shape, dtype = SHAPES["odd_bt"], DTYPES["bf16"]
    result = sessions[op.name].run_checked(shape, dtype, lambda: None)
    assert result.bad == op.output.numel(shape)
