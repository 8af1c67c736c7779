"""Generate the operators' kit from one definition: Grafana dashboards, Grafana-managed alert rules and the
Prometheus rules file. Dashboards and Grafana rules are built with Grafana's dashboards-as-code SDK
(``grafana-foundation-sdk``: typed builders that follow Grafana's schema); the Prometheus rules and their promtool
tests are Prometheus' own YAML. Run ``python grafana/generate.py`` after editing; a test fails if the files drift.

Series names are the Prometheus names of the telemetry contract (``rb_otel/telemetry/names.py``); a test checks
every name used here against it. ``$agent`` / ``$model`` are dashboard variables (``.*`` when "All").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.builders import (
    alerting,
    bargauge,
    common,
    dashboard,
    expr,
    heatmap,
    piechart,
    prometheus,
    table,
    timeseries,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import alerting as alerting_models
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as dashboard_models
from grafana_foundation_sdk.models import prometheus as prometheus_models

ROOT = Path(__file__).resolve().parent.parent
PROM_UID = "prometheus"
CLICKHOUSE_UID = "clickhouse"
CLICKHOUSE = {"type": "grafana-clickhouse-datasource", "uid": CLICKHOUSE_UID}
#: The table the Collector's clickhouse exporter writes (collector/clickhouse.yaml: database otel).
TRACES = "otel.otel_traces"
RUNS = "startsWith(SpanName, 'invoke_agent') AND SpanAttributes['gen_ai.operation.name'] = 'invoke_agent'"
CH_AGENT = "SpanAttributes['gen_ai.agent.name'] IN (${agent:singlequote})"
#: The chat spans of the selected agents' runs (a chat span carries no agent name: its run span does).
CH_STEPS = (f"startsWith(SpanName, 'chat') AND SpanAttributes['rb.fsm_state'] != '' AND TraceId IN "
            f"(SELECT TraceId FROM {TRACES} WHERE {RUNS} AND {CH_AGENT} AND $__timeFilter(Timestamp))")  # fmt: skip
CH_EXPERIMENT = "SpanAttributes['rb.experiment.id'] IN (${experiment:singlequote})"
TEMPO_UID = "tempo"
JAEGER_UID = "jaeger"
AGENT = 'gen_ai_agent_name=~"$agent"'
AGENT_MODEL = 'gen_ai_agent_name=~"$agent", gen_ai_request_model=~"$model"'
SKIP_TRACEQL = '{ span.rb.fsm_state = "SKIP" }'
RUNBOOK = "https://github.com/rb-otel/rb-otel/blob/main/README.md#operators-kit"

# -- alerts: one definition, two renderings (Prometheus rules and Grafana-managed rules) ------------------------

ALERTS: list[dict[str, Any]] = [
    {
        "alert": "RbOtelRunEnteredSkip",
        # A run can reach SKIP before the first scrape of a new series: `increase` misses a series whose first
        # sample is already 1, so the `unless ... offset` branch catches series that are new and non-zero.
        "expr": "sum by (gen_ai_agent_name) (increase(rb_runs_skip_total[5m])) > 0\n"
        "or\n"
        "sum by (gen_ai_agent_name) (rb_runs_skip_total unless rb_runs_skip_total offset 5m) > 0",
        "for": "0m",
        "severity": "warning",
        "summary": "An agent run of {{ $labels.gen_ai_agent_name }} reached SKIP",
        "description": "At least one run scored above the SKIP threshold for 35 consecutive steps in the last 5 "
        "minutes: the agent was stalled for a long stretch.",
        "runbook": "Open the run's trace (Tempo: " + SKIP_TRACEQL + ") and read the chat spans before SKIP: "
        "monitors fired, guidance injected, routed model. Decide whether the task or the tools are at fault.",
    },
    {
        "alert": "RbOtelSkipRunsSustained",
        "expr": "sum by (gen_ai_agent_name) (increase(rb_runs_skip_total[30m])) >= 3",
        "for": "10m",
        "severity": "critical",
        "summary": "{{ $labels.gen_ai_agent_name }}: three or more runs reached SKIP in 30 minutes",
        "description": "Runs keep stalling: three or more runs of this agent reached SKIP within 30 minutes.",
        "runbook": "Compare the SKIP runs on the FSM overview dashboard (outcomes by max state); look for a common "
        "tool error or task type, then roll back the latest prompt, model or tool change.",
    },
    {
        "alert": "RbOtelHighSlowShare",
        "expr": 'sum by (gen_ai_agent_name) (rate(rb_steps_total{rb_fsm_state="SLOW"}[15m]))\n'
        "/\n"
        "sum by (gen_ai_agent_name) (rate(rb_steps_total[15m])) > 0.5",
        "for": "15m",
        "severity": "warning",
        "summary": "{{ $labels.gen_ai_agent_name }}: more than half of the model calls are SLOW",
        "description": "Over 15 minutes more than 50% of this agent's model calls were made in the SLOW state "
        "(hard, hedging, error-laden reasoning).",
        "runbook": "Check the model and cost dashboard for a model change and the steering dashboard for the "
        "monitors that fire most; consider routing SLOW to a stronger model.",
    },
    {
        "alert": "RbOtelRunStuckInSkip",
        "expr": 'sum by (gen_ai_agent_name) (rb_runs_active{rb_fsm_state="SKIP"}) > 0',
        "for": "15m",
        "severity": "critical",
        "summary": "{{ $labels.gen_ai_agent_name }}: a run has been active in SKIP for 15 minutes",
        "description": "A run is still in flight in the SKIP state: it is burning tokens without progress.",
        "runbook": "Find the open run in the trace backend (Tempo: " + SKIP_TRACEQL + ") and cancel it; "
        "check the agent's step budget and recursion limit.",
    },
    {
        "alert": "RbOtelTelemetrySilent",
        # rb_runs_skip_total is initialised at 0 for every agent when its middleware is created and exported on
        # every collection, so its absence means the process or the export path is gone.
        "expr": "absent_over_time(rb_runs_skip_total[15m])",
        "for": "5m",
        "severity": "warning",
        "summary": "No rb-otel metrics for 15 minutes",
        "description": "No rb-otel series has been received for 15 minutes: the agents, the exporter or the "
        "collector pipeline stopped.",
        "runbook": "Check the agents are running, their OTEL_EXPORTER_OTLP_ENDPOINT, the collector's health "
        "endpoint and its Prometheus exporter; then the Prometheus scrape target.",
    },
]


# promtool unit tests: input series (1m apart), then (minute, alert, agent or None) expectations.
ALERT_TESTS: list[dict[str, Any]] = [
    {
        "name": "a run reaches SKIP between two scrapes",
        "series": {'rb_runs_skip_total{gen_ai_agent_name="coder"}': "0 0 1 1 1 1 1 1 1 1"},
        "expect": [
            (1, "RbOtelRunEnteredSkip", None),
            (3, "RbOtelRunEnteredSkip", "coder"),
            (9, "RbOtelRunEnteredSkip", None),
        ],
    },
    {
        "name": "a run reaches SKIP before the first scrape of its series",
        "series": {'rb_runs_skip_total{gen_ai_agent_name="fresh"}': "_ _ 1 1 1 1 1 1 1 1 1"},
        "expect": [(3, "RbOtelRunEnteredSkip", "fresh"), (10, "RbOtelRunEnteredSkip", None)],
    },
    {
        "name": "SKIP runs sustained over 30 minutes",
        "series": {'rb_runs_skip_total{gen_ai_agent_name="coder"}': "0+0.1x60"},
        "expect": [(5, "RbOtelSkipRunsSustained", None), (45, "RbOtelSkipRunsSustained", "coder")],
    },
    {
        "name": "most model calls are SLOW",
        "series": {
            'rb_steps_total{gen_ai_agent_name="coder", rb_fsm_state="SLOW"}': "0+9x60",
            'rb_steps_total{gen_ai_agent_name="coder", rb_fsm_state="NORMAL"}': "0+1x60",
            'rb_steps_total{gen_ai_agent_name="calm", rb_fsm_state="NORMAL"}': "0+9x60",
        },
        "expect": [(10, "RbOtelHighSlowShare", None), (40, "RbOtelHighSlowShare", "coder")],
    },
    {
        "name": "a run stays active in SKIP",
        "series": {
            'rb_runs_active{gen_ai_agent_name="coder", rb_fsm_state="SKIP"}': "1x40",
            'rb_runs_active{gen_ai_agent_name="calm", rb_fsm_state="SKIP"}': "0x40",
        },
        "expect": [(10, "RbOtelRunStuckInSkip", None), (20, "RbOtelRunStuckInSkip", "coder")],
    },
    {
        "name": "telemetry goes silent",
        "series": {'rb_runs_skip_total{gen_ai_agent_name="coder"}': "0x10 _x40"},
        "expect": [(10, "RbOtelTelemetrySilent", None), (40, "RbOtelTelemetrySilent", "")],
    },
]


def _annotations(alert: dict[str, Any], agent: str) -> dict[str, str]:
    def fill(text: str) -> str:
        return text.replace("{{ $labels.gen_ai_agent_name }}", agent)

    return {
        "summary": fill(alert["summary"]),
        "description": fill(alert["description"]),
        "runbook": fill(alert["runbook"]),
        "runbook_url": RUNBOOK,
    }


def promtool_tests() -> dict[str, Any]:
    by_name = {a["alert"]: a for a in ALERTS}
    tests = []
    for case in ALERT_TESTS:
        checks = []
        for minute, name, agent in case["expect"]:
            alert = by_name[name]
            expected = []
            if agent is not None:
                labels = {"severity": alert["severity"], "team": "agents"}
                if agent:
                    labels["gen_ai_agent_name"] = agent
                expected.append({"exp_labels": labels, "exp_annotations": _annotations(alert, agent)})
            checks.append({"eval_time": f"{minute}m", "alertname": name, "exp_alerts": expected})
        tests.append(
            {
                "name": case["name"],
                "interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in case["series"].items()],
                "alert_rule_test": checks,
            }
        )
    return {"rule_files": ["rb-otel.rules.yml"], "evaluation_interval": "1m", "tests": tests}


def prometheus_rules() -> dict[str, Any]:
    return {
        "groups": [
            {
                "name": "rb-otel",
                "rules": [
                    {
                        "alert": a["alert"],
                        "expr": a["expr"],
                        "for": a["for"],
                        "labels": {"severity": a["severity"], "team": "agents"},
                        "annotations": {
                            "summary": a["summary"],
                            "description": a["description"],
                            "runbook": a["runbook"],
                            "runbook_url": RUNBOOK,
                        },
                    }
                    for a in ALERTS
                ],
            }
        ]
    }


def _grafana_rule(alert: dict[str, Any]) -> alerting.Rule:
    """One alert as a Grafana-managed rule: the PromQL (query A) and a threshold on it (C, the condition)."""
    query = (
        alerting.Query("A")
        .datasource_uid(PROM_UID)
        .relative_time_range(alerting_models.RelativeTimeRange(from_val=1800, to=0))
        .model(prometheus.Dataquery().ref_id("A").expr(alert["expr"]).instant())
    )
    # the PromQL already filters: any returned series means the alert condition holds
    above_zero = expr.ExprTypeThresholdConditionsEvaluator().type("gt").params([0])
    threshold = (
        alerting.Query("C")
        .datasource_uid("__expr__")
        .model(
            expr.TypeThreshold()
            .ref_id("C")
            .expression("A")
            .conditions([expr.ExprTypeThresholdConditions().evaluator(above_zero)])
        )
    )
    return (
        alerting.Rule(alert["alert"])
        .uid(alert["alert"].lower().replace("rbotel", "rb-otel-")[:40])
        .condition("C")
        .queries([query, threshold])
        .no_data_state("OK")
        .exec_err_state("Error")
        .for_val(alert["for"])
        .labels({"severity": alert["severity"], "team": "agents"})
        .annotations(
            {
                "summary": alert["summary"],
                "description": alert["description"],
                "runbook_url": RUNBOOK,
                "runbook": alert["runbook"],
            }
        )
    )


def grafana_alerts() -> dict[str, Any]:
    """Grafana's alerting provisioning file: the rules built with the SDK, in the file's group envelope."""
    rules = [_encoded(_grafana_rule(a).build()) for a in ALERTS]
    return {
        "apiVersion": 1,
        "groups": [{"orgId": 1, "name": "rb-otel", "folder": "rb-otel", "interval": "1m", "rules": rules}],
    }


# -- dashboards -------------------------------------------------------------------------------------------------

TRACE_LINKS = [
    {
        "title": "SKIP runs in Tempo",
        "url": "/explore?left="
        + json.dumps(
            {"datasource": TEMPO_UID, "queries": [{"refId": "A", "queryType": "traceql", "query": SKIP_TRACEQL}]},
            separators=(",", ":"),
        ),
    },
    {
        "title": "SKIP runs in Jaeger",
        "url": "/explore?left="
        + json.dumps(
            {
                "datasource": JAEGER_UID,
                "queries": [{"refId": "A", "queryType": "search", "service": "$service", "tags": "rb.fsm_state=SKIP"}],
            },
            separators=(",", ":"),
        ),
    },
]


#: Panel kinds and their SDK builders.
PANELS: dict[str, Callable[[], Any]] = {
    "bargauge": bargauge.Panel,
    "heatmap": heatmap.Panel,
    "piechart": piechart.Panel,
    "table": table.Panel,
    "timeseries": timeseries.Panel,
}
PROMETHEUS = dashboard_models.DataSourceRef(type_val="prometheus", uid=PROM_UID)


def _variable(name: str, label: str, label_name: str, series: str = "rb_steps_total") -> dashboard.QueryVariable:
    """A multi-value "All"-able variable over one label of ``series`` (``.*`` when "All")."""
    query = f"label_values({series}, {label_name})"
    return (
        dashboard.QueryVariable(name)
        .label(label)
        .datasource(PROMETHEUS)
        .query(query)
        .include_all(True)
        .all_value(".*")
        .multi(True)
        .current(dashboard_models.VariableOption(selected=True, text=["All"], value=["$__all"]))
        .refresh(dashboard_models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dashboard_models.VariableSort.ALPHABETICAL_ASC)
    )


class Dashboard:
    """A dashboard under construction with Grafana's SDK: panels laid out two per row, ids assigned in order."""

    def __init__(
        self, uid: str, title: str, description: str, variables: list[dashboard.QueryVariable] | None = None
    ) -> None:
        self.uid = uid
        self.builder = (
            dashboard.Dashboard(title)
            .uid(uid)
            .description(description)
            .tags(["rb-otel", "agents", "opentelemetry"])
            .timezone("browser")
            .editable()
            .refresh("30s")
            .time("now-6h", "now")
        )
        default = [
            _variable("agent", "Agent", "gen_ai_agent_name"),
            _variable("model", "Model", "gen_ai_request_model"),
        ]
        for variable in default if variables is None else variables:
            self.builder.with_variable(variable)
        for link in TRACE_LINKS:
            self.builder.link(
                dashboard.DashboardLink(link["title"]).type(dashboard_models.DashboardLinkType.LINK).url(link["url"])
            )
        self._count = 0
        self._sql: dict[int, tuple[str | None, str]] = {}

    def panel(
        self,
        title: str,
        kind: str,
        targets: list[tuple[str, str]],
        *,
        unit: str = "short",
        description: str = "",
        links: bool = False,
        width: int = 12,
        stacked: bool = False,
        instant: bool = False,
        sql: str | None = None,
    ) -> None:
        """One panel; ``targets`` are its PromQL queries and legends, ``sql`` the same measure over the traces in
        ClickHouse (``otel_traces``, the grafana-clickhouse-datasource query model), or ``None`` for a measure
        only the metrics have: the ClickHouse rendering leaves that panel out."""
        self._count += 1
        self._sql[self._count] = (sql, "table" if instant or kind in ("table", "bargauge") else "timeseries")
        panel = (
            PANELS[kind]()
            .id(self._count)
            .title(title)
            .description(description)
            .datasource(PROMETHEUS)
            .unit(unit)
            .span(width)
            .height(8)
        )
        if links:
            panel.data_links([dashboard.DashboardLink(link["title"]).url(link["url"]) for link in TRACE_LINKS])
        if stacked:
            panel.legend(common.VizLegendOptions().show_legend(True).display_mode(common_models.LegendDisplayMode.LIST))
            panel.stacking(common.StackingConfig().mode(common_models.StackingMode.NORMAL))
        for i, (query, legend) in enumerate(targets):
            target = prometheus.Dataquery().ref_id(chr(ord("A") + i)).datasource(PROMETHEUS).expr(query)
            target.legend_format(legend)
            target.instant() if instant else target.range()
            if kind == "heatmap":
                target.format(prometheus_models.PromQueryFormat.HEATMAP)
            panel.with_target(target)
        self.builder.with_panel(panel)

    def render(self) -> dict[str, Any]:
        board = _encoded(self.builder.build())
        for panel in board["panels"]:
            panel["options"] = panel["options"] or {}  # a panel without options: Grafana reads an object, not null
        return board

    def render_clickhouse(self, variables: list[dict[str, Any]]) -> dict[str, Any]:
        """The same dashboard over the traces in ClickHouse: the panels that have SQL, their queries in the
        grafana-clickhouse-datasource model, ``variables`` in place of the Prometheus ones, the uid and title
        marked. The layout, units and descriptions are the Prometheus dashboard's."""
        board = self.render()
        board["uid"] = f"{board['uid']}-ch"
        board["title"] = f"{board['title']} (ClickHouse)"
        board["tags"] = [*board["tags"], "clickhouse"]
        panels = []
        for panel in board["panels"]:
            sql, shape = self._sql[panel["id"]]
            if sql is None:
                continue
            panel["datasource"] = dict(CLICKHOUSE)
            panel["targets"] = [{"refId": "A", "datasource": dict(CLICKHOUSE), "editorType": "sql",
                                 "format": 1 if shape == "table" else 0, "queryType": shape,
                                 "rawSql": " ".join(sql.split())}]  # fmt: skip
            panel.pop("interval", None)
            panels.append(panel)
        board["panels"] = panels
        board["templating"]["list"] = variables
        return board


def _encoded(model: object) -> dict[str, Any]:
    """An SDK model as the plain JSON-ready dict Grafana reads."""
    encoded: dict[str, Any] = json.loads(json.dumps(model, cls=JSONEncoder))
    return encoded


def fsm_overview() -> Dashboard:
    d = Dashboard("rb-otel-fsm", "rb-otel / FSM overview", "Where agent runs are in the difficulty FSM.")
    d.panel(
        "Runs in flight by state",
        "bargauge",
        [(f"sum by (rb_fsm_state) (rb_runs_active{{{AGENT}}})", "{{rb_fsm_state}}")],
        instant=True,
        description="Runs active now, by their current FSM state.",
    )
    d.panel(
        "Model calls by state",
        "timeseries",
        [(f"sum by (rb_fsm_state) (rate(rb_steps_total{{{AGENT_MODEL}}}[$__rate_interval]))", "{{rb_fsm_state}}")],
        unit="reqps",
        stacked=True,
        sql=f"SELECT $__timeInterval(Timestamp) AS time, SpanAttributes['rb.fsm_state'] AS state, "
        f"count() / $__interval_s AS calls FROM {TRACES} WHERE $__timeFilter(Timestamp) AND {CH_STEPS} "
        "GROUP BY time, state ORDER BY time",
    )
    d.panel(
        "State transitions (from -> to)",
        "table",
        [
            (
                f"sum by (rb_fsm_from, rb_fsm_to) (increase(rb_fsm_transitions_total{{{AGENT}}}[$__range]))",
                "{{rb_fsm_from}} -> {{rb_fsm_to}}",
            )
        ],
        instant=True,
        sql=f"SELECT concat(e.3['rb.fsm.from'], ' -> ', e.3['rb.fsm.to']) AS transition, count() AS times "
        f"FROM {TRACES} ARRAY JOIN arrayZip(Events.Timestamp, Events.Name, Events.Attributes) AS e "
        f"WHERE $__timeFilter(Timestamp) AND e.2 = 'rb.fsm.transition' AND {RUNS} AND {CH_AGENT} "
        "GROUP BY transition ORDER BY times DESC",
    )
    d.panel(
        "Difficulty distribution",
        "bargauge",
        [(f"sum by (le) (increase(rb_step_difficulty_bucket{{{AGENT}}}[$__range]))", "{{le}}")],
        instant=True,
        description="Scored steps per difficulty bucket.",
        sql="SELECT toString(ceil(toFloat64OrZero(SpanAttributes['rb.difficulty']) * 10) / 10) AS le, count() AS steps "
        f"FROM {TRACES} WHERE $__timeFilter(Timestamp) AND {CH_STEPS} AND SpanAttributes['rb.difficulty'] != '' "
        "GROUP BY le ORDER BY le",
    )
    d.panel(
        "Difficulty heatmap",
        "heatmap",
        [(f"sum by (le) (rate(rb_step_difficulty_bucket{{{AGENT}}}[$__rate_interval]))", "{{le}}")],
    )
    d.panel(
        "Runs entering SKIP",
        "timeseries",
        [
            (
                f"sum by (gen_ai_agent_name) (increase(rb_runs_skip_total{{{AGENT}}}[$__rate_interval]))",
                "{{gen_ai_agent_name}}",
            )
        ],
        links=True,
        description="Click a point for the SKIP runs in Tempo or Jaeger.",
        sql=f"SELECT $__timeInterval(Timestamp) AS time, SpanAttributes['gen_ai.agent.name'] AS agent, "
        f"countIf(SpanAttributes['rb.entered_skip'] = 'true') AS skip_runs FROM {TRACES} "
        f"WHERE $__timeFilter(Timestamp) AND {RUNS} AND {CH_AGENT} GROUP BY time, agent ORDER BY time",
    )
    d.panel(
        "Outcomes by max state",
        "table",
        [
            (
                f"sum by (rb_outcome, rb_max_state) (increase(rb_runs_total{{{AGENT}}}[$__range]))",
                "{{rb_outcome}} / {{rb_max_state}}",
            )
        ],
        instant=True,
        links=True,
        sql="SELECT SpanAttributes['rb.outcome'] AS outcome, SpanAttributes['rb.max_state'] AS max_state, "
        f"count() AS runs FROM {TRACES} WHERE $__timeFilter(Timestamp) AND {RUNS} AND {CH_AGENT} "
        "GROUP BY outcome, max_state ORDER BY runs DESC",
    )
    d.panel(
        "Finished runs by outcome",
        "timeseries",
        [(f"sum by (rb_outcome) (rate(rb_runs_total{{{AGENT}}}[$__rate_interval]))", "{{rb_outcome}}")],
        unit="reqps",
        sql=f"SELECT $__timeInterval(Timestamp) AS time, SpanAttributes['rb.outcome'] AS outcome, "
        f"count() / $__interval_s AS runs FROM {TRACES} WHERE $__timeFilter(Timestamp) AND {RUNS} AND {CH_AGENT} "
        "GROUP BY time, outcome ORDER BY time",
    )
    return d


def model_cost() -> Dashboard:
    d = Dashboard("rb-otel-models", "rb-otel / Models and cost", "Tokens, latency and routing by FSM state.")
    d.panel(
        "Tokens by state and routed model",
        "table",
        [
            (
                f"sum by (rb_fsm_state, gen_ai_request_model) (increase("
                f"gen_ai_client_token_usage_sum{{{AGENT_MODEL}}}[$__range]))",
                "{{rb_fsm_state}} / {{gen_ai_request_model}}",
            )
        ],
        instant=True,
    )
    d.panel(
        "Tokens per second by type",
        "timeseries",
        [
            (
                "sum by (gen_ai_token_type) (rate(gen_ai_client_token_usage_"
                'sum{gen_ai_request_model=~"$model"}[$__rate_interval]))',
                "{{gen_ai_token_type}}",
            )
        ],
    )
    d.panel(
        "Model-call latency",
        "timeseries",
        [
            (
                f"histogram_quantile({q}, sum by (le) (rate(gen_ai_client_operation_duration_seconds_bucket"
                f'{{gen_ai_request_model=~"$model"}}[$__rate_interval])))',
                f"p{int(q * 100)}",
            )
            for q in (0.5, 0.95, 0.99)
        ],
        unit="s",
    )
    d.panel(
        "Routing share",
        "piechart",
        [
            (
                f"sum by (gen_ai_request_model) (increase(rb_steps_total{{{AGENT}}}"
                f"[$__range])) / ignoring(gen_ai_request_model) group_left sum(increase(rb_steps_total{{{AGENT}}}"
                "[$__range]))",
                "{{gen_ai_request_model}}",
            )
        ],
        unit="percentunit",
        instant=True,
    )
    d.panel(
        "Agent run duration p95",
        "timeseries",
        [
            (
                f"histogram_quantile(0.95, sum by (le, gen_ai_agent_name) ("
                f"rate(gen_ai_invoke_agent_duration_seconds_bucket{{{AGENT}}}[$__rate_interval])))",
                "{{gen_ai_agent_name}}",
            )
        ],
        unit="s",
    )
    d.panel(
        "Tool latency p95",
        "timeseries",
        [
            (
                "histogram_quantile(0.95, sum by (le, gen_ai_tool_name) (rate("
                "gen_ai_execute_tool_duration_seconds_bucket[$__rate_interval])))",
                "{{gen_ai_tool_name}}",
            )
        ],
        unit="s",
    )
    return d


def steering() -> Dashboard:
    d = Dashboard("rb-otel-steering", "rb-otel / Steering", "Monitors, guidance injections and steering overhead.")
    d.panel(
        "Monitors fired",
        "bargauge",
        [(f"sum by (rb_monitor) (increase(rb_monitor_fired_total{{{AGENT}}}[$__range]))", "{{rb_monitor}}")],
        instant=True,
    )
    d.panel(
        "Monitor firings over time",
        "timeseries",
        [(f"sum by (rb_monitor) (rate(rb_monitor_fired_total{{{AGENT}}}[$__rate_interval]))", "{{rb_monitor}}")],
    )
    d.panel(
        "Injections by source",
        "piechart",
        [
            (
                f"sum by (rb_injection_source) (increase(rb_injections_total{{{AGENT}}}[$__range]))",
                "{{rb_injection_source}}",
            )
        ],
        instant=True,
    )
    d.panel(
        "Steering overhead per model call",
        "timeseries",
        [
            (
                f"histogram_quantile({q}, sum by (le) (rate(rb_steering_duration_seconds_bucket{{{AGENT}}}"
                "[$__rate_interval])))",
                f"p{int(q * 100)}",
            )
            for q in (0.5, 0.95)
        ]
        + [
            (
                f"sum(rate(rb_steering_duration_seconds_sum{{{AGENT}}}[$__rate_interval])) / "
                f"sum(rate(rb_steering_duration_seconds_count{{{AGENT}}}[$__rate_interval]))",
                "mean",
            )
        ],
        unit="s",
    )
    return d


EXPERIMENT = 'rb_experiment_id=~"$experiment"'
#: The price the cost panel assumes (USD per million tokens): a dashboard variable, since runs are counted in
#: tokens; ``rb-otel ab-report --prices`` prices each call by its model instead.
PRICE_VARIABLE = (
    dashboard.CustomVariable("price_per_mtok")
    .label("USD per 1M tokens")
    .values("5,1,3,15")
    .current(dashboard_models.VariableOption(selected=True, text="5", value="5"))
)


def _by_arm(metric: str, window: str = "$__rate_interval", extra: str = "") -> str:
    return f"sum by (rb_experiment_arm) (increase({metric}{{{EXPERIMENT}{extra}}}[{window}]))"


def experiments() -> Dashboard:
    d = Dashboard(
        "rb-otel-experiments",
        "rb-otel / Experiments",
        "A/B experiments: does steering pay for itself? Success rate, tokens and cost per arm over time.",
        variables=[_variable("experiment", "Experiment", "rb_experiment_id", series="rb_runs_total"), PRICE_VARIABLE],
    )
    d.panel(
        "Success rate by arm",
        "timeseries",
        [
            (
                _by_arm("rb_runs_total", extra=', rb_outcome="success"') + " / " + _by_arm("rb_runs_total"),
                "{{rb_experiment_arm}}",
            )
        ],
        unit="percentunit",
        description="Finished runs that succeeded, per arm (the report's Newcombe interval: rb-otel ab-report).",
        sql=f"SELECT $__timeInterval(Timestamp) AS time, SpanAttributes['rb.experiment.arm'] AS arm, "
        f"countIf(SpanAttributes['rb.outcome'] = 'success') / count() AS success_rate FROM {TRACES} "
        f"WHERE $__timeFilter(Timestamp) AND {RUNS} AND {CH_EXPERIMENT} GROUP BY time, arm ORDER BY time",
    )
    d.panel(
        "Runs by arm and outcome",
        "table",
        [
            (
                f"sum by (rb_experiment_arm, rb_outcome) (increase(rb_runs_total{{{EXPERIMENT}}}[$__range]))",
                "{{rb_experiment_arm}} / {{rb_outcome}}",
            )
        ],
        instant=True,
        sql="SELECT SpanAttributes['rb.experiment.arm'] AS arm, SpanAttributes['rb.outcome'] AS outcome, "
        f"count() AS runs FROM {TRACES} WHERE $__timeFilter(Timestamp) AND {RUNS} AND {CH_EXPERIMENT} "
        "GROUP BY arm, outcome ORDER BY arm, outcome",
    )
    d.panel(
        "Tokens per run by arm (mean)",
        "timeseries",
        [(_by_arm("rb_run_tokens_sum") + " / " + _by_arm("rb_run_tokens_count"), "{{rb_experiment_arm}}")],
        sql=f"SELECT $__timeInterval(Timestamp) AS time, SpanAttributes['rb.experiment.arm'] AS arm, "
        f"avg(toInt64OrZero(SpanAttributes['rb.tokens'])) AS tokens FROM {TRACES} "
        f"WHERE $__timeFilter(Timestamp) AND {RUNS} AND {CH_EXPERIMENT} GROUP BY time, arm ORDER BY time",
    )
    d.panel(
        "Tokens per run by arm (median)",
        "timeseries",
        [
            (
                "histogram_quantile(0.5, sum by (le, rb_experiment_arm) "
                f"(rate(rb_run_tokens_bucket{{{EXPERIMENT}}}[$__rate_interval])))",
                "{{rb_experiment_arm}}",
            )
        ],
        sql=f"SELECT $__timeInterval(Timestamp) AS time, SpanAttributes['rb.experiment.arm'] AS arm, "
        f"quantile(0.5)(toInt64OrZero(SpanAttributes['rb.tokens'])) AS tokens FROM {TRACES} "
        f"WHERE $__timeFilter(Timestamp) AND {RUNS} AND {CH_EXPERIMENT} GROUP BY time, arm ORDER BY time",
    )
    d.panel(
        "Estimated cost per run by arm",
        "timeseries",
        [
            (
                f"({_by_arm('rb_run_tokens_sum')} / {_by_arm('rb_run_tokens_count')}) * $price_per_mtok / 1000000",
                "{{rb_experiment_arm}}",
            )
        ],
        unit="currencyUSD",
        description="Mean tokens per run at the price chosen above (per model pricing: rb-otel ab-report --prices).",
        sql=f"SELECT $__timeInterval(Timestamp) AS time, SpanAttributes['rb.experiment.arm'] AS arm, "
        f"avg(toInt64OrZero(SpanAttributes['rb.tokens'])) * $price_per_mtok / 1000000 AS cost FROM {TRACES} "
        f"WHERE $__timeFilter(Timestamp) AND {RUNS} AND {CH_EXPERIMENT} GROUP BY time, arm ORDER BY time",
    )
    d.panel(
        "Characters saved per run by arm (TokenSavingMiddleware)",
        "bargauge",
        [
            (
                _by_arm("rb_token_saving_chars_saved_total", "$__range") + " / " + _by_arm("rb_runs_total", "$__range"),
                "{{rb_experiment_arm}}",
            )
        ],
        instant=True,
    )
    return d


DASHBOARDS = {
    "fsm-overview.json": fsm_overview,
    "models-and-cost.json": model_cost,
    "steering.json": steering,
    "experiments.json": experiments,
}


def _ch_variable(name: str, label: str, sql: str) -> dict[str, Any]:
    """A multi-value "All"-able variable from a ClickHouse query (every value when "All")."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": dict(CLICKHOUSE),
        "query": " ".join(sql.split()),
        "definition": " ".join(sql.split()),
        "includeAll": True,
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "refresh": 2,
        "sort": 1,
    }


def _agent_variables() -> list[dict[str, Any]]:
    return [_ch_variable("agent", "Agent", f"SELECT DISTINCT SpanAttributes['gen_ai.agent.name'] FROM {TRACES} "
                         f"WHERE {RUNS} AND $__timeFilter(Timestamp)")]  # fmt: skip


def _experiment_variables() -> list[dict[str, Any]]:
    price = _encoded(PRICE_VARIABLE.build())
    experiment = _ch_variable("experiment", "Experiment", "SELECT DISTINCT SpanAttributes['rb.experiment.id'] "
                              f"FROM {TRACES} WHERE {RUNS} AND SpanAttributes['rb.experiment.id'] != '' "
                              "AND $__timeFilter(Timestamp)")  # fmt: skip
    return [experiment, price]


#: The dashboards rendered for a ClickHouse datasource too (the traces in otel_traces), with their variables.
CLICKHOUSE_DASHBOARDS: dict[str, tuple[Callable[[], Dashboard], Callable[[], list[dict[str, Any]]]]] = {
    "fsm-overview.json": (fsm_overview, _agent_variables),
    "experiments.json": (experiments, _experiment_variables),
}

#: The SKIP alert over the traces in ClickHouse: runs of each agent that entered SKIP in the last 5 minutes.
CLICKHOUSE_SKIP_SQL = (
    f"SELECT SpanAttributes['gen_ai.agent.name'] AS gen_ai_agent_name, "
    f"countIf(SpanAttributes['rb.entered_skip'] = 'true') AS skip_runs FROM {TRACES} "
    f"WHERE {RUNS} AND Timestamp >= now() - INTERVAL 5 MINUTE GROUP BY gen_ai_agent_name"
)


def clickhouse_alerts() -> dict[str, Any]:
    """RbOtelRunEnteredSkip in its ClickHouse form: the same title, labels and annotations as the Prometheus
    rule, its data a ClickHouse query (one row per agent), fired when an agent has a SKIP run."""
    alert = next(a for a in ALERTS if a["alert"] == "RbOtelRunEnteredSkip")
    query = {"refId": "A", "datasourceUid": CLICKHOUSE_UID, "relativeTimeRange": {"from": 600, "to": 0},
             "model": {"refId": "A", "datasource": dict(CLICKHOUSE), "editorType": "sql", "format": 1,
                       "queryType": "table", "rawSql": CLICKHOUSE_SKIP_SQL}}  # fmt: skip
    threshold = {"refId": "B", "datasourceUid": "__expr__", "relativeTimeRange": {"from": 0, "to": 0},
                 "model": {"refId": "B", "type": "threshold", "expression": "A",
                           "conditions": [{"evaluator": {"type": "gt", "params": [0]}}]}}  # fmt: skip
    rule = {
        "uid": "rb-otel-run-entered-skip-ch",
        "title": f"{alert['alert']} (ClickHouse)",
        "condition": "B",
        "data": [query, threshold],
        "for": alert["for"],
        "noDataState": "OK",
        "execErrState": "Error",
        "labels": {"severity": alert["severity"], "team": "agents"},
        "annotations": {
            "summary": alert["summary"],
            "description": alert["description"],
            "runbook": alert["runbook"],
            "runbook_url": RUNBOOK,
        },
    }
    group = {"orgId": 1, "name": "rb-otel-clickhouse", "folder": "rb-otel", "interval": "1m", "rules": [rule]}
    return {"apiVersion": 1, "groups": [group]}


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (PromQL) as literal blocks, so the rules read like the source."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _yaml(data: dict[str, Any]) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def outputs() -> dict[Path, str]:
    files = {
        ROOT / "grafana" / "dashboards" / name: json.dumps(build().render(), indent=2) + "\n"
        for name, build in DASHBOARDS.items()
    }
    for name, (build, variables) in CLICKHOUSE_DASHBOARDS.items():
        board = build().render_clickhouse(variables())
        files[ROOT / "grafana" / "dashboards-clickhouse" / name] = json.dumps(board, indent=2) + "\n"
    header = "# Generated by grafana/generate.py from one alert definition; edit that file, not this one.\n"
    files[ROOT / "prometheus" / "rb-otel.rules.yml"] = header + _yaml(prometheus_rules())
    files[ROOT / "prometheus" / "rb-otel.rules.test.yml"] = header + _yaml(promtool_tests())
    files[ROOT / "grafana" / "provisioning" / "alerting" / "rb-otel-alerts.yaml"] = header + _yaml(grafana_alerts())
    files[ROOT / "grafana" / "provisioning" / "alerting" / "rb-otel-alerts-clickhouse.yaml"] = header + _yaml(
        clickhouse_alerts()
    )
    return files


def main() -> None:
    for path, content in outputs().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
