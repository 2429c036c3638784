"""Device resolution: the one place where ``device="auto"`` is turned into a device."""

from __future__ import annotations

import torch

from pos_geometry.errors import InvalidArgumentError

__all__ = ["resolve_device"]


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
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
