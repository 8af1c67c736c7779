"""The statistics of an experiment report: Wilson and Newcombe intervals, the sample-ratio check, robust means.

Pure functions of counts and lists, each checked in the tests against values computed by hand.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "SRM_ALPHA",
    "Z_95",
    "SrmResult",
    "median",
    "newcombe_diff_ci",
    "srm_check",
    "wilson_interval",
    "winsorized_mean",
]

#: The two-sided 95% normal quantile.
Z_95 = 1.959963984540054
#: A sample-ratio mismatch is flagged below this p-value (strict, as SRM checks are run on every report).
SRM_ALPHA = 0.001


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson's score interval for a proportion; ``(0.0, 1.0)`` when ``n`` is 0."""
    _check_counts(successes, n)
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_diff_ci(successes_a: int, n_a: int, successes_b: int, n_b: int, z: float = Z_95) -> tuple[float, float]:
    """Newcombe's hybrid score interval (1998, method 10) for ``p_a - p_b``, from the two Wilson intervals.

    Newcombe's own example: 56/70 against 48/80 gives 0.2 with (0.0524, 0.3339).
    """
    lo_a, hi_a = wilson_interval(successes_a, n_a, z)
    lo_b, hi_b = wilson_interval(successes_b, n_b, z)
    p_a = successes_a / n_a if n_a else 0.5
    p_b = successes_b / n_b if n_b else 0.5
    delta = p_a - p_b
    lower = delta - math.sqrt((p_a - lo_a) ** 2 + (hi_b - p_b) ** 2)
    upper = delta + math.sqrt((hi_a - p_a) ** 2 + (p_b - lo_b) ** 2)
    return max(-1.0, lower), min(1.0, upper)


@dataclass(frozen=True, slots=True)
class SrmResult:
    """The sample-ratio check: did the arms get the share of units the assignment promises?"""

    chi_square: float
    p_value: float
    flagged: bool
    expected_on: float
    expected_off: float

    def __iter__(self) -> Iterator[float | bool]:
        """Unpacks as ``(chi_square, p_value, flagged, expected_on, expected_off)``."""
        return iter((self.chi_square, self.p_value, self.flagged, self.expected_on, self.expected_off))


def srm_check(n_on: int, n_off: int, on_fraction: float, *, alpha: float = SRM_ALPHA) -> SrmResult:
    """Pearson's chi-square goodness of fit of ``(n_on, n_off)`` to ``on_fraction``, one degree of freedom.

    ``p = erfc(sqrt(chi_square / 2))`` (the chi-square(1) survival function). With ``on_fraction`` 0 or 1 an arm
    expects nothing: any unit in it is a certain mismatch (``p = 0``).
    """
    _check_counts(n_on, n_on + n_off)
    _check_counts(n_off, n_on + n_off)
    if not 0.0 <= on_fraction <= 1.0:
        raise ValueError(f"on_fraction must be in [0, 1], got {on_fraction!r}")
    total = n_on + n_off
    expected_on, expected_off = total * on_fraction, total * (1.0 - on_fraction)
    chi = 0.0
    impossible = False
    for observed, expected in ((n_on, expected_on), (n_off, expected_off)):
        if expected > 0:
            chi += (observed - expected) ** 2 / expected
        elif observed > 0:
            impossible = True
    if impossible:
        return SrmResult(math.inf, 0.0, True, expected_on, expected_off)
    p_value = math.erfc(math.sqrt(chi / 2.0))
    return SrmResult(chi, p_value, p_value < alpha, expected_on, expected_off)


def median(values: Sequence[float]) -> float | None:
    """The median, ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def winsorized_mean(values: Sequence[float], share: float = 0.05) -> float | None:
    """The mean after clamping the lowest and highest ``share`` of values to the nearest kept value (5% each tail
    by default: one runaway run does not decide the tokens per run)."""
    if not values:
        return None
    ordered = sorted(values)
    k = int(len(ordered) * share)
    if k:
        low, high = ordered[k], ordered[-k - 1]
        ordered = [min(max(v, low), high) for v in ordered]
    return sum(ordered) / len(ordered)


def _check_counts(successes: int, n: int) -> None:
    if isinstance(successes, bool) or isinstance(n, bool) or not isinstance(successes, int) or not isinstance(n, int):
        raise TypeError("counts must be integers")
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"counts must satisfy 0 <= successes <= n, got {successes} of {n}")
