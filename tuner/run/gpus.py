"""GPU labels: the short name a results directory and a study are filed under ("h200").

A label is derived from the name the device reports, and a label the user gives is checked
against that name, so that an H200 is never filed under h100 by a typo.
"""

from __future__ import annotations

import argparse
import re

from results.schema import InvalidGpuLabel, check_gpu_label
from variants.errors import RepkvTuneError

# Words that say who made the card or which line it belongs to, not which chip it is.
_VENDOR_WORDS = {"nvidia", "tesla", "geforce", "quadro", "amd", "radeon", "instinct"}
# Words that name a product line: kept with the model number that follows ("rtx4090").
_LINE_WORDS = {"rtx", "gtx", "titan"}


class GpuLabelMismatch(RepkvTuneError, ValueError):
    """A label that does not name the device present."""


def _words(device_name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", device_name.lower()) if w]


def default_label(device_name: str) -> str:
    """'NVIDIA H200' -> 'h200'; 'NVIDIA A100-SXM4-80GB' -> 'a100'; 'NVIDIA GeForce RTX 4090' ->
    'rtx4090'; 'NVIDIA RTX A6000' -> 'rtxa6000'. Memory sizes and form factors are dropped."""
    words = [w for w in _words(device_name) if w not in _VENDOR_WORDS]
    if not words:
        raise InvalidGpuLabel(f"cannot derive a GPU label from the device name {device_name!r}")
    if words[0] in _LINE_WORDS and len(words) > 1:
        return words[0] + words[1]
    return words[0]


def validate_label(label: str) -> str:
    """`label` if it can name a GPU (results.schema.check_gpu_label, the one check every label
    is held to); InvalidGpuLabel otherwise."""
    return check_gpu_label(label)


def gpu_label_argument(value: str) -> str:
    """argparse type of a --gpu option (case folded: H200 is h200): a usage error (exit 2, one
    line) for a label that cannot name a GPU, before anything is read or written."""
    try:
        return check_gpu_label(value.lower())
    except InvalidGpuLabel as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def label_matches(label: str, device_name: str) -> bool:
    """Whether label names the device: it is the derived label, optionally followed by a
    separator and a refinement ('h100' or 'h100-pcie' for 'NVIDIA H100 PCIe'; never 'h20')."""
    base = default_label(device_name)
    plain = label.lower()
    if plain == base:
        return True
    if plain.startswith(base) and not plain[len(base)].isalnum():
        return True
    # 'rtx-4090' for 'rtx4090': compare without separators, same refinement rule.
    squashed = re.sub(r"[^a-z0-9]", "", plain)
    return squashed == base


def resolve_label(label: str | None, device_name: str, *, force: bool = False) -> str:
    """The label to file results under: the given one (checked against the device unless
    force) or, without one, the label derived from the device name."""
    if label is None:
        return validate_label(default_label(device_name))
    validate_label(label)
    if not force and not label_matches(label, device_name):
        raise GpuLabelMismatch(
            f"--gpu {label} does not match the device present ({device_name}, label "
            f"{default_label(device_name)}); drop --gpu, or pass --force-gpu-label to file it under {label}"
        )
    return label
