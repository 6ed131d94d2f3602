"""results.peaks: one table of peak bandwidths, by the name the device reports."""

from __future__ import annotations

import math

import pytest

from results.peaks import PEAK_GBPS, frac_peak, peak_gbps


def test_known_and_unknown_devices() -> None:
    assert peak_gbps("NVIDIA H200") == 4800.0
    assert peak_gbps("NVIDIA H100 PCIe") == 2000.0 != peak_gbps("NVIDIA H100 80GB HBM3")
    assert peak_gbps("SYNTHETIC H100") is None and peak_gbps(None) is None and peak_gbps(float("nan")) is None
    assert all(value > 1000 for value in PEAK_GBPS.values())


def test_fraction_of_peak() -> None:
    assert frac_peak(2400.0, "NVIDIA H200") == pytest.approx(0.5)
    assert frac_peak(2400, "NVIDIA H200") == pytest.approx(0.5)
    assert frac_peak(math.nan, "NVIDIA H200") is None
    assert frac_peak(None, "NVIDIA H200") is None
    assert frac_peak(2400.0, "a GPU nobody listed") is None
