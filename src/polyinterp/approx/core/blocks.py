"""Edges of a range cut into near-equal blocks: the block rows and columns of a quadratic form's upper
triangle (:class:`~polyinterp.approx.core.approximant.Approximant`'s evaluation, the SGD fit's forms)."""

from __future__ import annotations


def block_edges(d: int, block: int) -> list[int]:
    """Edges 0 = e_0 < e_1 < … < e_n = d of n = ⌈d / block⌉ blocks of 0…d, as equal as they can be
    (each at most ``block`` long); ``[0, 0]`` for d = 0."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    blocks = max(1, -(-d // block))
    return [round(i * d / blocks) for i in range(blocks + 1)]
