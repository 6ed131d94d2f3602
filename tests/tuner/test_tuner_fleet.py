"""The pure parts of `--devices`: which devices, which storage, each child's command line."""

from __future__ import annotations

import pytest

from tuner.run.fleet import (
    Device,
    FleetError,
    check_labels,
    child_argv,
    parse_devices,
    shared_storage,
    visible_device,
)


def test_devices_are_indices_once_each_and_all_only_on_a_gpu_host() -> None:
    assert [d.index for d in parse_devices("0,1,3", replay=True)] == [0, 1, 3]
    with pytest.raises(FleetError, match="appears twice"):
        parse_devices("0,0", replay=True)
    with pytest.raises(FleetError, match="name the workers"):
        parse_devices("all", replay=True)
    with pytest.raises(FleetError, match="indices such as 0,1"):
        parse_devices("gpu0", replay=True)


def test_one_model_per_gpu_label_and_gpu_refused_across_models() -> None:
    mixed = [
        Device(0, "NVIDIA H100 80GB HBM3"),
        Device(1, "NVIDIA H100 80GB HBM3"),
        Device(2, "NVIDIA A100-SXM4-80GB"),
    ]
    assert [d.label for d in mixed] == ["h100", "h100", "a100"]
    check_labels(mixed, None)  # each child files its rows under its own label
    with pytest.raises(FleetError, match=r"a100: 2; h100: 0,1"):
        check_labels(mixed, "h100")
    check_labels(mixed[:2], "h100")


def test_the_children_share_a_storage_several_processes_can_use(tmp_path) -> None:
    assert shared_storage(None, tmp_path) == f"journal:{tmp_path.resolve() / 'optuna.journal'}"
    assert shared_storage("postgresql://u@h/db", tmp_path) == "postgresql://u@h/db"
    for refused in (f"sqlite:///{tmp_path}/o.db", "memory"):
        with pytest.raises(FleetError, match="journal:FILE"):
            shared_storage(refused, tmp_path)
    with pytest.raises(FleetError, match="--results"):
        shared_storage(None, None)


def test_a_child_gets_its_device_seed_and_the_shared_storage() -> None:
    argv = [
        "--devices",
        "0,1",
        "--shape",
        "B=1,T=2,NH=2,NH_KV=1,HD=8",
        "--seed=5",
        "--storage",
        "x",
        "--trials",
        "9",
    ]
    argv_child = child_argv(argv, Device(1, "NVIDIA H200"), 5, "journal:/r/optuna.journal", replay=False)
    assert argv_child == [
        *["tune", "--shape", "B=1,T=2,NH=2,NH_KV=1,HD=8", "--trials", "9"],
        *["--storage", "journal:/r/optuna.journal", "--no-progress", "--device", "0", "--seed", "6"],
    ]
    replayed = child_argv(["tune", "--devices=0,2"], Device(2, "replay"), None, "s", replay=True)
    assert replayed == ["tune", "--storage", "s", "--no-progress", "--device", "2"]


def test_a_child_sees_only_its_gpu(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_device(3) == "3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert visible_device(1) == "6"


@pytest.mark.parametrize("devices", ["0,1", "all"])
def test_devices_without_cupy_say_what_is_missing_and_what_to_install(
    monkeypatch, capsys, devices: str
) -> None:
    import sys

    from tuner.cli.main import main

    monkeypatch.setitem(sys.modules, "cupy", None)  # as on a host without the cuda12/cuda13 extra
    with pytest.raises(FleetError) as caught:
        parse_devices(devices, replay=False)
    message = str(caught.value)
    assert message.startswith(f"--devices {devices}: no GPU to tune on: CuPy is not installed: ")
    assert "pip install 'repkv-tune[cuda12]'" in message and "--replay DIR" in message
    assert "give the indices" not in message
    assert main(["--devices", devices, "--shape", "B=1,T=256,NH=14,NH_KV=2,HD=64", "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
