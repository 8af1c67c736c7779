"""The contract's counters as plain in-process sums, read by the SDK at each collection.

A counter exports only its sum per attribute set, so an ``add`` needs no SDK call: :class:`SummedCounter` keeps
the sums in a dict (an ``add`` is one dict update under a lock) and registers an observable counter (or
up-down counter) whose callback reports them when a reader collects. What is exported is the same as from
``meter.create_counter(name).add(value, attributes)``, the plain definition (``Instruments(meter, summed=False)``
uses it; ``tests/test_sums.py`` checks the two export the same points, cumulative and delta): the same metric
names, units, descriptions, point kinds (a monotonic or non-monotonic sum), temporality and attributes. What
differs: counter points carry no exemplars (an observation has no span context; the histograms keep theirs),
and a collection reads the sums as they are at that moment rather than the SDK's record-time aggregation.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

__all__ = ["SummedCounter"]

_Key = tuple[tuple[str, Any], ...]

# One SummedCounter per meter and name: the SDK keeps the first observable instrument registered under a name and
# ignores a second one's callback, so two Telemetry objects sharing a meter (a disabled one's always-on twin, two
# ReasonBlocks on one provider) must add to the same sums, as they would to the same synchronous counter.
_SHARED: weakref.WeakKeyDictionary[Any, dict[str, SummedCounter]] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


class SummedCounter:
    """A counter (``monotonic``) or up-down counter kept as in-process sums, exported through an observable
    instrument of the same name. :meth:`add` has the synchronous counter's signature; ``context`` is accepted
    and unused (no exemplars)."""

    __slots__ = ("_lock", "_sums", "name")

    def __init__(self, meter: metrics.Meter, name: str, *, unit: str, description: str, monotonic: bool = True) -> None:
        self.name = name
        self._sums: dict[_Key, int | float] = {}
        self._lock = threading.Lock()
        create = meter.create_observable_counter if monotonic else meter.create_observable_up_down_counter
        create(name, callbacks=[self._observe], unit=unit, description=description)

    @classmethod
    def of(
        cls, meter: metrics.Meter, name: str, *, unit: str, description: str, monotonic: bool = True
    ) -> SummedCounter:
        """The meter's summed counter ``name``, made on first use (what ``meter.create_counter`` is for the
        synchronous kind: the same instrument for the same name)."""
        with _SHARED_LOCK:
            try:
                counters = _SHARED.setdefault(meter, {})
            except TypeError:  # a meter that cannot be weakly referenced: its own counter each time
                return cls(meter, name, unit=unit, description=description, monotonic=monotonic)
            found = counters.get(name)
            if found is None:
                found = counters[name] = cls(meter, name, unit=unit, description=description, monotonic=monotonic)
            return found

    def add(self, amount: int | float, attributes: Mapping[str, Any] | None = None, context: Any = None) -> None:
        """Add ``amount`` to the sum of ``attributes`` (their order does not matter: a collection merges)."""
        key: _Key = tuple(attributes.items()) if attributes else ()
        try:
            with self._lock:
                self._sums[key] = self._sums.get(key, 0) + amount
        except TypeError:  # a sequence value (unhashable): keyed by its tuple
            key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in key)
            with self._lock:
                self._sums[key] = self._sums.get(key, 0) + amount

    def sums(self) -> dict[_Key, int | float]:
        """The sum of every attribute set added to so far, each set's items sorted by key."""
        with self._lock:
            items = list(self._sums.items())
        merged: dict[_Key, int | float] = {}
        for key, value in items:
            # attributes built in another order are the same series; a sequence value becomes a tuple
            normal = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in key))
            merged[normal] = merged.get(normal, 0) + value
        return merged

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, dict(key)) for key, value in self.sums().items()]
