"""An A/B experiment's inputs computed in the store: one row per run of the experiment and the model usage
summed by arm and model (:class:`~rb_otel.ab.experiment_report.ArmRun`, :class:`~rb_otel.ab.experiment_report.
ArmUsage`), from which :func:`rb_otel.ab.experiment_report.answer` computes the report the files path prints.

Why rows per run rather than per arm: the report's tokens per run are a median and a winsorized mean, which need
each run's total; every other figure is a count or a sum the same rows give. The store does the joining (the
parts of a resumed run by ``rb.run_id``, each part's model calls by ``ParentSpanId``) and the summing: Python
receives a few columns per run and one row per arm and model, never the spans. The definitions are the files
path's (:func:`rb_otel.ab.experiment_report.arm_runs`): the last part's attributes, the parts' summed totals, the
first part's start, the steps and tokens of the ``chat`` spans that were steps (no ``rb.call.source``) when the
run span carries none. The time window, agent, service and experiment filters are in the ``WHERE`` of the run
spans' scan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rb_otel.ab.arm_rows import ArmRun, ArmUsage
from rb_otel.analysis.fleet import FleetFilter, quote, run_predicates, starts_at_or_after
from rb_otel.types import FSMState

__all__ = ["arm_runs_from_store", "arm_usage_from_store", "experiment_sql", "experiments_found_sql"]

# The states by severity, as an array whose 1-based index is the severity + 1 (indexOf gives 0 for other text).
_BY_SEVERITY = "[" + ", ".join(quote(s.value) for s in sorted(FSMState, key=lambda s: s.severity)) + "]"
_IS_STEP = "NOT mapContains(SpanAttributes, 'rb.call.source')"


def _tokens(key: str) -> str:
    return f"greatest(toInt64OrZero(SpanAttributes['{key}']), 0)"


def _parts(table: str, where: FleetFilter, experiment_id: str | None) -> str:
    predicates = run_predicates(where, operation=False)
    if experiment_id is not None:
        predicates.append(f"SpanAttributes['rb.experiment.id'] = {quote(experiment_id)}")
    else:
        predicates.append("mapContains(SpanAttributes, 'rb.experiment.id')")
    return f"""
        SELECT if(SpanAttributes['rb.run_id'] != '', SpanAttributes['rb.run_id'], SpanId) AS run_id,
               argMax(SpanAttributes['rb.experiment.id'], Timestamp) AS experiment,
               argMax(SpanAttributes['rb.experiment.arm'], Timestamp) AS arm,
               argMax(SpanAttributes['rb.experiment.unit'], Timestamp) AS unit,
               argMax(SpanAttributes['rb.outcome'], Timestamp) AS outcome,
               toInt64(toUnixTimestamp64Nano(min(Timestamp))) AS start_ns,
               max(mapContains(SpanAttributes, 'rb.tokens')) AS has_tokens,
               sum(toInt64OrZero(SpanAttributes['rb.tokens'])) AS tokens,
               sum(toInt64OrZero(SpanAttributes['rb.usage.unreported'])) AS unreported,
               sum(toInt64OrZero(SpanAttributes['rb.steps'])) AS steps,
               argMax(SpanAttributes['rb.max_state'], Timestamp) AS max_state,
               argMax(SpanAttributes['rb.task_profile'], Timestamp) AS task_profile,
               argMax(SpanAttributes['rb.entered_skip'], Timestamp) = 'true' AS entered_skip,
               argMax(mapContains(SpanAttributes, 'rb.token_saving.chars_saved'), Timestamp) AS has_saved,
               argMax(toInt64OrZero(SpanAttributes['rb.token_saving.chars_saved']), Timestamp) AS saved,
               argMax(SpanAttributes['rb.experiment.on_fraction'], Timestamp) AS on_fraction,
               groupArray(SpanId) AS part_ids
        FROM {table} WHERE {" AND ".join(predicates)} GROUP BY run_id"""


def experiment_sql(table: str, experiment_id: str, where: FleetFilter) -> tuple[str, str]:
    """The two queries: the experiment's runs (:func:`arm_runs_from_store`'s columns) and its usage by arm and
    model (:func:`arm_usage_from_store`'s)."""
    parts = _parts(table, where, experiment_id)
    chats = f"startsWith(SpanName, 'chat') AND ParentSpanId IN (SELECT arrayJoin(part_ids) FROM ({parts}))"
    if where.since is not None:  # a model call starts after its run part: the same bound prunes the scan
        chats += " AND " + starts_at_or_after(where.since)
    steps = f"""
        SELECT ParentSpanId AS part, countIf({_IS_STEP}) AS n_steps,
               sumIf({_tokens("gen_ai.usage.input_tokens")} + {_tokens("gen_ai.usage.output_tokens")}, {_IS_STEP})
                   AS step_tokens,
               maxIf(indexOf({_BY_SEVERITY}, SpanAttributes['rb.fsm_state']),
                     {_IS_STEP} AND SpanAttributes['rb.fsm_state'] != '') AS severity
        FROM {table} WHERE {chats} GROUP BY part"""
    runs = f"""
        SELECT r.run_id, any(r.experiment), any(r.arm), any(r.unit), any(r.outcome), any(r.start_ns),
               any(r.has_tokens), any(r.tokens), any(r.unreported), any(r.steps), any(r.max_state),
               any(r.task_profile), any(r.entered_skip), any(r.has_saved), any(r.saved), any(r.on_fraction),
               sum(s.n_steps), sum(s.step_tokens), {_BY_SEVERITY}[max(s.severity)] AS most_severe
        FROM (SELECT *, arrayJoin(part_ids) AS part FROM ({parts})) AS r
        LEFT JOIN ({steps}) AS s ON s.part = r.part
        GROUP BY r.run_id ORDER BY any(r.start_ns), r.run_id"""
    usage = f"""
        SELECT r.arm AS arm,
               if(SpanAttributes['gen_ai.response.model'] != '', SpanAttributes['gen_ai.response.model'],
                  SpanAttributes['gen_ai.request.model']) AS model,
               countIf({_tokens("gen_ai.usage.input_tokens")} + {_tokens("gen_ai.usage.output_tokens")}
                       + {_tokens("gen_ai.usage.cache_read.input_tokens")} > 0) AS calls,
               sum({_tokens("gen_ai.usage.input_tokens")}), sum({_tokens("gen_ai.usage.output_tokens")}),
               sum({_tokens("gen_ai.usage.cache_read.input_tokens")})
        FROM {table} AS c
        INNER JOIN (SELECT arm, arrayJoin(part_ids) AS part FROM ({parts})) AS r ON c.ParentSpanId = r.part
        WHERE {chats} GROUP BY arm, model ORDER BY arm, model"""
    return runs, usage


def experiments_found_sql(table: str, where: FleetFilter) -> str:
    """Runs per experiment id under ``where``: what an error for an experiment with no runs lists."""
    return f"SELECT experiment, count() FROM ({_parts(table, where, None)}) GROUP BY experiment ORDER BY experiment"


def _fraction(text: Any) -> float | None:
    try:
        return float(text) if str(text) not in ("", "true", "false") else None
    except ValueError:
        return None


def arm_runs_from_store(rows: Iterable[Sequence[Any]]) -> list[ArmRun]:
    """:class:`ArmRun` rows from the runs query's result rows (in its column order)."""
    out = []
    for row in rows:
        run_id, experiment, arm, unit, outcome, start_ns, has_tokens, tokens, unreported, steps = row[:10]
        max_state, task_profile, entered_skip, has_saved, saved, on_fraction, n_steps, step_tokens, severe = row[10:]
        total = int(tokens) or int(step_tokens or 0)
        out.append(
            ArmRun(
                run_id=str(run_id),
                experiment=str(experiment),
                arm=str(arm),
                unit=str(unit),
                outcome=str(outcome),
                start_ns=int(start_ns),
                tokens=None if not int(has_tokens) and int(unreported) else total,
                partly_unreported=bool(int(unreported)),
                steps=int(steps) or int(n_steps or 0),
                max_state=str(max_state or severe or ""),
                task_profile=str(task_profile),
                entered_skip=bool(int(entered_skip)),
                chars_saved=int(saved) if int(has_saved) else None,
                on_fraction=_fraction(on_fraction),
            )
        )
    return out


def arm_usage_from_store(rows: Iterable[Sequence[Any]]) -> list[ArmUsage]:
    """:class:`ArmUsage` rows from the usage query's result rows."""
    return [ArmUsage(str(a), str(m), int(c), int(i), int(o), int(r)) for a, m, c, i, o, r in rows]
