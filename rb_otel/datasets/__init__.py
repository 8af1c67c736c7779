"""The development records (other projects' published agent runs) that tests, research scripts and ``make``
targets read: where they are (:func:`data_root`), each source as a folder (:func:`source_folder`), and how a
machine without them gets them from their public origins (``python -m rb_otel.datasets fetch``, i.e.
``make data``). Only the development pipeline (:mod:`rb_otel.training.development`), the research scripts, the
benchmarks and the tests import it; a steered agent never does."""

from rb_otel.datasets.root import (
    DATA_ENV,
    FETCH_COMMAND,
    DataNotFound,
    data_root,
    find_data_root,
    holds_records,
    repository_root,
)
from rb_otel.datasets.unpack import CACHE_ENV, cache_folder, source_folder

__all__ = [
    "CACHE_ENV",
    "DATA_ENV",
    "FETCH_COMMAND",
    "DataNotFound",
    "cache_folder",
    "data_root",
    "find_data_root",
    "holds_records",
    "repository_root",
    "source_folder",
]
