"""Device resolution: the one place where ``device="auto"`` is turned into a device."""

from __future__ import annotations

import torch

from pos_geometry.errors import InvalidArgumentError

__all__ = ["Device", "resolve_device", "same_device"]

Device = str | torch.device | None
"""What every ``device`` argument accepts: ``"auto"`` (or None: CUDA, then Apple MPS, else the CPU), a device
name torch understands (``"cpu"``, ``"cuda:1"``), or a ``torch.device``."""


def resolve_device(device: Device = "auto") -> torch.device:
    """Return the ``torch.device`` meant by ``device``.

    ``"auto"`` (or ``None``) picks CUDA when available, then Apple MPS, else the CPU.
    Any other string is parsed by torch; asking for CUDA where there is none raises.
    """
    if device is None or (isinstance(device, str) and device == "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidArgumentError(
            f"device={device!r} is not a device torch understands; "
            "use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(
            f"device={device!r} was requested but torch reports no CUDA device on this machine "
            f"(torch {torch.__version__}); use device='cpu' or device='auto'."
        )
    return resolved


def same_device(a: str | torch.device, b: str | torch.device) -> bool:
    """Whether ``a`` and ``b`` name the same device: ``"cuda"`` (no index) is the current CUDA device, so
    it is ``cuda:0`` when that is current; ``"cpu"`` and ``"cpu:0"`` are the same."""

    def canonical(d: str | torch.device) -> tuple[str, int]:
        d = torch.device(d)
        if d.index is not None:
            return d.type, d.index
        if d.type == "cuda" and torch.cuda.is_available():
            return d.type, torch.cuda.current_device()
        return d.type, 0

    return canonical(a) == canonical(b)
