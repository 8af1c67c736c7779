"""What every analysis command takes: ``SOURCE...`` (paths, or one store URL), ``--engine`` and the filters.

``report``, ``ab-report``, ``evaluate`` and ``train`` share these options so that a source and a filter mean the
same on each (docs/fleet-analysis.md).
"""

from __future__ import annotations

import argparse
import datetime
from typing import TYPE_CHECKING, Any

from rb_otel.cli.inputs import INPUT, VALUE, declare

if TYPE_CHECKING:
    from rb_otel.analysis import FleetFilter

__all__ = ["URLS", "add_filters", "add_source_options", "source_filter"]

#: How the help names the URLs a source may be.
URLS = "clickhouse://user@host:8123/db?table=otel_traces, clickhouses://..., chdb:///folder"


def _moment(text: str) -> datetime.datetime:
    """``--since``/``--until``: an ISO date or date and time, UTC unless it says otherwise."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        message = f"not an ISO date or time: {text!r} (e.g. 2026-12-01 or 2026-12-01T08:00)"
        raise argparse.ArgumentTypeError(message) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def add_filters(parser: Any) -> None:
    """``--since``, ``--until``, ``--agent``, ``--service``: which runs, pushed down to the source."""
    parser.add_argument("--since", type=_moment, default=None, help="runs starting at or after (ISO date/time, UTC)")
    parser.add_argument("--until", type=_moment, default=None, help="runs starting before (ISO date/time, UTC)")
    parser.add_argument("--agent", default=None, help="only this agent (gen_ai.agent.name)")
    parser.add_argument("--service", default=None, help="only this service (service.name)")
    declare(parser, agent=VALUE, service=VALUE)


def add_source_options(parser: Any, *, files: str, engine: str) -> None:
    """The ``SOURCE...`` argument (``files`` says what files it takes), ``--engine`` (``engine`` says what it
    changes) and the filters."""
    from rb_otel.analysis.sources import ENGINES

    parser.add_argument("paths", nargs="+", metavar="SOURCE", help=f"{files}, or one URL: {URLS}")
    parser.add_argument("--engine", default="python", choices=ENGINES, help=engine)
    add_filters(parser)
    declare(parser, paths=INPUT)


def source_filter(args: argparse.Namespace) -> FleetFilter:
    """The :class:`~rb_otel.analysis.fleet.FleetFilter` the filter options give."""
    from rb_otel.analysis import FleetFilter

    return FleetFilter(since=args.since, until=args.until, agent=args.agent, service=args.service)
