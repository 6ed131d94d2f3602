"""Peak DRAM bandwidth of the GPUs whose figure is known, from NVIDIA's data sheets, by the name
the device reports (`gpu_name` in the rows): what "% of peak" is taken against, in the tuner's
winners table, the service's answers, the dashboards and the peers benchmark. A GPU not listed
gets no such figure."""

from __future__ import annotations

PEAK_GBPS: dict[str, float] = {  # GB/s, 10^9 bytes per second
    "NVIDIA H200": 4800.0,
    "NVIDIA H200 NVL": 4800.0,
    "NVIDIA H100 80GB HBM3": 3350.0,  # H100 SXM5
    "NVIDIA H100 NVL": 3900.0,
    "NVIDIA H100 PCIe": 2000.0,
    "NVIDIA B200": 8000.0,
    "NVIDIA A100-SXM4-80GB": 2039.0,
    "NVIDIA A100-SXM4-40GB": 1555.0,
    "NVIDIA A100 80GB PCIe": 1935.0,
}


def peak_gbps(gpu_name: object) -> float | None:
    """The peak of the device named so, or None when it is not known."""
    return PEAK_GBPS.get(gpu_name) if isinstance(gpu_name, str) else None


def frac_peak(gbps: object, gpu_name: object) -> float | None:
    """Achieved GB/s over the device's peak, or None when either is unknown."""
    peak = peak_gbps(gpu_name)
    if peak is None or not isinstance(gbps, (int, float)) or gbps != gbps:
        return None
    return float(gbps) / peak
