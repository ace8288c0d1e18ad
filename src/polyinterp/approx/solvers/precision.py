"""The precision of the operator products inside block PCG (``inner_dtype``), parsed in one place for
every exact solve (the mixture quadratic's and the principal-component polynomial's)."""

from __future__ import annotations

import torch

from polyinterp.approx.core.errors import ApproxInputError

# the names a config or caller may give; None (or "float64") means float64 products: no second operator
INNER_DTYPES = {"auto": "auto", "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": None}


def fast_inner_dtype(device) -> torch.dtype:
    """bfloat16 where its matrix products are fast (CUDA compute capability ≥ 8.0; CPUs with
    AVX512-BF16 or AMX), else float32 (elsewhere bfloat16 is emulated and slower than float32)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.get_device_capability(device)[0] >= 8 else torch.float32
    if device.type == "cpu":
        cpu = getattr(torch, "cpu", None)
        probes = [getattr(cpu, n, None) for n in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
        if any(f is not None and f() for f in probes):
            return torch.bfloat16
    return torch.float32


def resolve_inner_dtype(value, allowed: tuple[str, ...] = tuple(INNER_DTYPES), *, device=None,
                        d: int | None = None, key: str = "inner_dtype") -> torch.dtype | None:
    """The dtype of the products inside the iteration for ``value`` (a name in ``allowed``, the torch
    dtype of one, or None), or None for float64 products (the true residual's own precision).

    ``"auto"`` (when allowed) is bfloat16 where :func:`fast_inner_dtype` says it is fast on ``device``
    and the problem has ``d`` ≥ 256 inputs (below that the products are cheap and bfloat16 would only
    cost iterations), float32 otherwise. Anything else raises :class:`ApproxInputError` naming ``key``,
    the value and the allowed names.
    """
    names = {name: INNER_DTYPES[name] for name in allowed}
    dtypes = [t for t in names.values() if isinstance(t, torch.dtype)]
    if value is None or value == torch.float64:
        resolved = None
    elif isinstance(value, str) and value in names:
        resolved = names[value]
    elif isinstance(value, torch.dtype) and value in dtypes:
        resolved = value
    else:
        raise ApproxInputError(f"{key} must be one of {sorted(names)} (or None, or the torch dtype of one), "
                               f"got {value!r}")
    if resolved == "auto":
        if device is None or d is None:
            raise ApproxInputError(f"{key} 'auto' needs the device and the input dimension d")
        resolved = fast_inner_dtype(device) if d >= 256 else torch.float32
    return resolved
