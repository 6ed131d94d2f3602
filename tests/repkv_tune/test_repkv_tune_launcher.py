"""repkv_tune.launcher without a GPU: the one selection path for every op (the op's index,
families and generic configuration; the race for the default op only), with the device,
the compiler and the race faked."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from repkv_tune import launcher as L  # noqa: E402
from results.selection import generic_config, layout_tuned  # noqa: E402
from variants import DTYPES, OPS, Config, Shape, get_dtype, get_op, runs_on  # noqa: E402


@pytest.mark.parametrize(
    ("op", "shape", "dtype", "expected"),
    [
        (
            "rope_repkv_forward",
            (2, 64, 32, 8, 128),
            "bf16",
            "vec[block=256,load=plain,store=plain,vec_bytes=16]",
        ),
        (
            "repkv_rope_backward",
            (2, 64, 32, 8, 2),
            "fp32",
            "vec[block=256,load=plain,store=plain,vec_bytes=8]",
        ),
        (
            "repkv_rope_backward",
            (2, 64, 32, 8, 2),
            "bf16",
            "vec[block=256,load=plain,store=plain,vec_bytes=4]",
        ),
        ("repkv_forward", (2, 64, 32, 8, 128), "fp32", "vec[block=256,load=plain,store=plain,vec_bytes=16]"),
        ("repkv_forward", (2, 64, 32, 8, 6), "bf16", "vec[block=256,load=plain,store=plain,vec_bytes=4]"),
        ("repkv_forward", (2, 64, 32, 8, 3), "bf16", "naive[block=128]"),
        ("rope_repkv_forward", (1, 5, 4, 2, 6), "fp16", "vec[block=256,load=plain,store=plain,vec_bytes=4]"),
    ],
)
def test_the_generic_configuration_of_each_op(op, shape, dtype, expected) -> None:
    config = generic_config(Shape(*shape), DTYPES[dtype], get_op(op))
    assert config.key == expected
    # it serves: the op's family compiles it for the shape
    get_op(op).family(config.family).name_expression(Shape(*shape), DTYPES[dtype], config)


def test_the_default_ops_generic_configuration_is_the_selections() -> None:

    shape, dtype = Shape(2, 64, 32, 8, 72), DTYPES["bf16"]
    assert generic_config(shape, dtype, get_op()) == generic_config(shape, dtype)


def test_an_odd_hd_has_no_rope_kernel() -> None:
    with pytest.raises(ValueError, match="no kernel of rope_repkv_forward serves"):
        generic_config(Shape(1, 2, 2, 1, 5), DTYPES["fp32"], get_op("rope_repkv_forward"))


def test_runs_on_reads_the_ops_own_families() -> None:
    op = get_op("repkv_forward")
    assert runs_on(Config.of("replicate", block=256), 80, op)  # no such family in repkv_backward
    assert not runs_on(Config.of("bulk", block=256), 90, op)
    assert not runs_on(Config.of("bulk", block=256), 80, get_op())  # bulk needs sm_90


@pytest.fixture
def fake_device(monkeypatch, tmp_path):
    """An H200 that compiles nothing: compile_launcher and the race recorded, not run (with the
    neighbours a refining race would add, in `refined`)."""
    compiled, raced, refined = [], [], []

    def compile_launcher(shape, dtype, config, device, served, op=None):
        op = op or get_op()
        compiled.append((op.name, config.key, served))
        return L.Launcher(
            function=0,
            grid=1,
            block=1,
            config_key=config.key,
            config=config,
            served_from=served,
            _keep=(),
            op=op.name,
        )

    def race(launchers, op, shape, dtype, device, gpu, refine=None):
        assert {lch.op for lch in launchers} == {op.name}
        raced.append([lch.config_key for lch in launchers])
        if refine is not None:  # the neighbours of the race's winner, compiled
            refined.append([lch.config_key for lch in refine(launchers[-1])])
        return launchers[-1]

    monkeypatch.setattr(L, "compile_launcher", compile_launcher)
    monkeypatch.setattr(L, "_race", race)
    monkeypatch.setattr(L, "RACE", True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    launchers = L.Launchers(tmp_path / "no-user-results")
    launchers.refined = refined
    return launchers, compiled, raced


def test_every_op_is_chosen_from_its_own_index(fake_device) -> None:
    """Each op's tuned shape is served exactly, with the winner of that op's own index."""
    from repkv_tune.race import L2

    launchers, compiled, raced = fake_device
    tuned_key = ((8, 1024, 32, 8, 128), "bf16", 0)
    default = launchers.get(tuned_key)  # the bundled seed shape
    assert default.served_from == "exact" and default.op == "repkv_backward" and not raced
    index = launchers.index()
    built = {}
    for op in OPS:
        if op == "repkv_backward":
            continue
        groups = index.for_op(op).in_state(L2).groups
        shape = next(key[1] for key in sorted(groups) if key[0] == "h200" and key[2] == "bf16")
        launcher = built[op] = launchers.get((shape, "bf16", 0), op)
        assert (launcher.op, launcher.served_from) == (op, "exact")
        assert launcher.config_key == groups[("h200", shape, "bf16")].best.config_key
        assert launcher.config.family in get_op(op).families
        assert launchers.get((shape, "bf16", 0), op) is launcher  # kept per (op, shape, dtype, device)
    assert not raced and len(compiled) == 1 + len(built)
    for op in built:  # an untuned shape races the op's own shortlist
        before = len(compiled)
        nearest = launchers.get(((3, 1000, 32, 8, 128), "bf16", 0), op)
        assert nearest.op == op and raced[-1][-1] == nearest.config_key
        assert compiled[before:] and {name for name, _, _ in compiled[before:]} == {op}
    assert launchers.get(tuned_key) is default


def test_an_op_with_nothing_tuned_near_serves_its_generic_configuration(fake_device, monkeypatch) -> None:
    import results.selection

    launchers, compiled, raced = fake_device
    monkeypatch.setattr(results.selection, "shortlist", lambda *args, **kwargs: [])
    before = len(compiled)
    for op, shape, dtype, key in (
        (
            "rope_repkv_forward",
            (2, 64, 32, 8, 128),
            "bf16",
            "vec[block=256,load=plain,store=plain,vec_bytes=16]",
        ),
        (
            "repkv_rope_backward",
            (2, 64, 32, 8, 2),
            "fp32",
            "vec[block=256,load=plain,store=plain,vec_bytes=8]",
        ),
        ("repkv_forward", (2, 64, 32, 8, 3), "bf16", "naive[block=128]"),
    ):
        launcher = launchers.get((shape, dtype, 0), op)
        assert (launcher.op, launcher.served_from, launcher.config_key) == (op, "generic", key)
    assert not raced and len(compiled) == before + 3


def test_an_untuned_shape_races_each_ops_own_shortlist(fake_device, monkeypatch) -> None:
    import results.selection

    launchers, compiled, raced = fake_device
    untuned = ((3, 1000, 32, 8, 128), "bf16", 0)
    assert launchers.get(untuned).served_from == "nearest" and len(raced) == 1 and len(raced[0]) >= 2

    config = get_op("rope_repkv_forward").baseline
    other = Config.of("vec", block=128, vec_bytes=16, load="plain", store="plain")
    listed = [
        SimpleNamespace(
            candidate=SimpleNamespace(config=c), group=SimpleNamespace(gpu="h200"), match="nearest"
        )
        for c in (other, config)
    ]
    seen = []

    def shortlist(index, gpu, shape, dtype, other_gpus=False):
        seen.append(index.op)
        return listed

    monkeypatch.setattr(results.selection, "shortlist", shortlist)
    before = len(compiled)
    launcher = launchers.get(untuned, "rope_repkv_forward")
    assert seen == ["rope_repkv_forward"] and raced[1:] == [[other.key, config.key]]
    assert compiled[before:] == [("rope_repkv_forward", c.key, "nearest") for c in (other, config)]
    assert launcher.config_key == config.key  # the fake race's pick, the last


def test_a_layout_nobody_tuned_races_the_winners_neighbours_too(fake_device) -> None:
    """A new head layout (40 query heads on one K/V head) races its shortlist, then the winner
    against its one-parameter neighbours, compiled; a tuned layout at a new B*T races only."""
    launchers, compiled, raced = fake_device
    shape, dtype = Shape(1, 1024, 40, 1, 128), get_dtype("bf16")
    groups = launchers.index().for_op("repkv_backward").groups_of("h200")
    assert not layout_tuned(groups, shape, dtype)
    launcher = launchers.get(((1, 1024, 40, 1, 128), "bf16", 0))
    (steps,) = launchers.refined
    winner = launcher.config
    expected = [c.key for c in get_op().family(winner.family).neighbours(shape, dtype, winner)]
    assert steps == expected and len(steps) >= 4 and winner.key not in steps
    assert compiled[-len(steps) :] == [("repkv_backward", key, "nearest") for key in steps]

    launchers.get(((3, 1000, 32, 8, 128), "bf16", 0))  # the seed's layout, tuned: no refining
    assert len(raced) == 2 and len(launchers.refined) == 1


def test_a_shape_searched_for_one_family_races_its_best_against_the_nearest_shapes(
    fake_device, tmp_path
) -> None:
    """A user's `python -m tuner --family split` at a shape the store never tuned: the op
    serves that split first ("partial") but races it against the nearest shapes' picks."""
    from trial_rows import SPLIT16, trial

    from results.store import write_table

    launchers, compiled, raced = fake_device
    shape = Shape(3, 1000, 32, 8, 128)
    rows = [trial("h200", shape, "bf16", "split", SPLIT16, 0.05)]
    write_table(rows, tmp_path / "no-user-results", "synthetic-split-only")
    launcher = launchers.get(((3, 1000, 32, 8, 128), "bf16", 0))
    split = Config.of("split", **SPLIT16).key
    assert len(raced) == 1 and raced[0][0] == split and len(raced[0]) >= 2
    assert compiled[0] == ("repkv_backward", split, "partial")
    assert {served for _, _, served in compiled[1:]} == {"nearest"}
    assert launcher.config_key == raced[0][-1]  # the fake race keeps the last


def test_compiling_without_cupy_names_the_extra_to_install(monkeypatch) -> None:
    # a CUDA call where CuPy is not installed ended in the bare "No module named 'cupy'"
    monkeypatch.setitem(sys.modules, "cupy", None)  # None: cupy will not import
    shape, dtype = Shape(2, 64, 32, 8, 128), DTYPES["bf16"]
    config = generic_config(shape, dtype, get_op())
    with pytest.raises(
        ModuleNotFoundError, match=r"CuPy, which is not installed: pip install 'repkv-tune\[torch,cuda13\]'"
    ):
        L.compile_launcher(shape, dtype, config, 0, "generic")


def test_an_unknown_repkv_l2_is_named_at_the_first_call(fake_device, monkeypatch) -> None:
    # it said "unknown L2 state 'warm': one of cold, fed", naming no variable or argument
    launchers, compiled, _ = fake_device
    monkeypatch.setattr(L, "L2", "warm")
    with pytest.raises(ValueError, match=r"REPKV_L2='warm' names no L2 state: set cold or fed"):
        launchers.get(((8, 1024, 32, 8, 128), "bf16", 0))
    assert not compiled
