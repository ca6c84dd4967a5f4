"""The torch device a model runs on when its settings name none, and the device kind that cache
keys record (GPU kernels change the last digits of a result; which GPU does not)."""

from __future__ import annotations


def resolve_device(device: str | None = None) -> str:
    """`device` itself, else ``cuda`` when a GPU is visible, else ``cpu``."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_kind(device: str) -> str:
    """``cuda:1`` -> ``cuda``."""
    return device.split(":")[0]


def gpu_count() -> int:
    """GPUs visible to torch (0 without torch or CUDA)."""
    try:
        import torch  # lazy: torch is heavy and optional
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0
