"""A step's concurrency split over a pool's live clients, by weight."""

from __future__ import annotations


def split(concurrency: int, weights: dict[str, int]) -> dict[str, int]:
    """Each client's share, summing to `concurrency` exactly: whole parts by weight, the rest
    one at a time by the largest remainder (ties by name, so every driver splits alike).

    >>> split(7, {"c1": 1, "c2": 1, "c3": 1})
    {'c1': 3, 'c2': 2, 'c3': 2}
    >>> split(4, {"big": 3, "small": 1})
    {'big': 3, 'small': 1}
    """
    total = sum(weights.values())
    if not weights or total <= 0:
        return {}
    exact = {name: concurrency * w / total for name, w in weights.items()}
    shares = {name: int(x) for name, x in exact.items()}
    order = sorted(weights, key=lambda name: (-(exact[name] - shares[name]), name))
    for name in order[: concurrency - sum(shares.values())]:
        shares[name] += 1
    return dict(sorted(shares.items()))
