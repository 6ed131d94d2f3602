"""Where the tests find nvcc: on PATH, or from the pip package nvidia-cuda-nvcc."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations if spec else []:
        for candidate in sorted(Path(root).glob("cu*/bin/nvcc")):
            return str(candidate)
    return None
