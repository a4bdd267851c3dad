"""Confidence intervals of a proportion (failure rates of behavioural tests)."""

from __future__ import annotations

import math


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of ``k`` successes in ``n`` trials (Wilson 1927; recommended over
    the Wald interval by Brown, Cai and DasGupta 2001); ``(nan, nan)`` when ``n`` is 0."""
    if n == 0:
        return float("nan"), float("nan")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # exact bounds at the ends (centre - half is 0 there only up to rounding)
    lower = 0.0 if k == 0 else max(0.0, centre - half)
    upper = 1.0 if k == n else min(1.0, centre + half)
    return lower, upper
