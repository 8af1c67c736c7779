"""The operators' kit, proven with real components: promtool, Prometheus, Alertmanager, rotel."""

from __future__ import annotations

import contextlib
import json
import os
import re
import runpy
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml
from components import debian_binary, free_port, http_json, process, rotel_agent, wait_until

from rb_otel.telemetry import names

ROOT = Path(__file__).resolve().parents[1]
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
RULES = ROOT / "prometheus" / "rb-otel.rules.yml"
SERIES = {s for group in names.PROMETHEUS_SERIES.values() for s in group}
# Prometheus label names of the contract's metric attributes
LABELS = {
    v.replace(".", "_")
    for k, v in vars(names).items()
    if k.startswith(("RB_", "GEN_AI_", "ERROR_")) and isinstance(v, str)
} | {"le", "job", "instance"}
VARIABLES = {
    "$agent": ".*",
    "$model": ".*",
    "$experiment": ".*",
    "$price_per_mtok": "5",
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "10m",
}


def dashboard_exprs() -> list[tuple[str, str]]:
    out = []
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            out += [(f"{path.name}: {panel['title']}", t["expr"]) for t in panel["targets"]]
    return out


def rule_exprs() -> list[tuple[str, str]]:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    return [(r["alert"], r["expr"]) for r in rules]


def substitute(expr: str) -> str:
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def metric_names(expr: str) -> set[str]:
    return {t for t in re.findall(r"\b(?:rb|gen_ai)_\w+", expr) if t not in LABELS}


# -- static checks -----------------------------------------------------------------------------------------


def test_generated_files_are_current() -> None:
    generator = runpy.run_path(str(ROOT / "grafana" / "generate.py"))
    for path, content in generator["outputs"]().items():
        assert path.read_text() == content, f"{path} is stale: run python grafana/generate.py"


def test_dashboards_structure() -> None:
    provisioned = yaml.safe_load((ROOT / "grafana/provisioning/datasources/datasources.yaml").read_text())
    uids = {d["uid"] for d in provisioned["datasources"]} | {"__expr__"}
    assert len(DASHBOARDS) == 4
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), f"{path.name}: duplicate panel ids"
        refs = [p["datasource"]["uid"] for p in board["panels"]]
        refs += [t["datasource"]["uid"] for p in board["panels"] for t in p["targets"]]
        refs += [v["datasource"]["uid"] for v in board["templating"]["list"] if v["type"] == "query"]
        assert set(refs) <= uids, f"{path.name}: unprovisioned datasource"
        defined = {f"${v['name']}" for v in board["templating"]["list"]}
        for panel in board["panels"]:
            for target in panel["targets"]:
                used = set(re.findall(r"\$[a-z_]+", target["expr"])) - {"$__rate_interval", "$__range", "$__interval"}
                assert used <= defined, f"{path.name}/{panel['title']}: undefined variable {used - defined}"
                unknown = metric_names(target["expr"]) - SERIES
                assert not unknown, f"{path.name}/{panel['title']}: not in the telemetry contract: {unknown}"
        assert any("traceql" in json.dumps(link) for link in board["links"])
    for _, expr in rule_exprs():
        assert not metric_names(expr) - SERIES


CLICKHOUSE_DASHBOARDS = sorted((ROOT / "grafana" / "dashboards-clickhouse").glob("*.json"))


def _clickhouse_queries() -> list[tuple[str, str]]:
    """Every SQL the ClickHouse dashboards, their variables and the ClickHouse alert rule send."""
    out = []
    for path in CLICKHOUSE_DASHBOARDS:
        board = json.loads(path.read_text())
        out += [(f"{path.name}: {p['title']}", t["rawSql"]) for p in board["panels"] for t in p["targets"]]
        out += [(f"{path.name}: ${v['name']}", v["query"]) for v in board["templating"]["list"] if v["type"] == "query"]
    rules = yaml.safe_load((ROOT / "grafana/provisioning/alerting/rb-otel-alerts-clickhouse.yaml").read_text())
    out += [(r["title"], d["model"]["rawSql"]) for r in rules["groups"][0]["rules"] for d in r["data"] if
            "rawSql" in d["model"]]  # fmt: skip
    return out


def test_clickhouse_dashboards_are_the_prometheus_panels_over_the_traces() -> None:
    """The same panel definitions: each ClickHouse panel is a panel of the Prometheus dashboard of the same name
    (id, title, kind, unit), its queries on the provisioned ClickHouse datasource, its variables defined."""
    provisioned = yaml.safe_load((ROOT / "grafana/provisioning/datasources/datasources.yaml").read_text())
    kinds = {d["uid"]: d["type"] for d in provisioned["datasources"]}
    assert kinds["clickhouse"] == "grafana-clickhouse-datasource"
    assert [p.name for p in CLICKHOUSE_DASHBOARDS] == ["experiments.json", "fsm-overview.json"]
    for path in CLICKHOUSE_DASHBOARDS:
        board = json.loads(path.read_text())
        twin = json.loads((ROOT / "grafana" / "dashboards" / path.name).read_text())
        assert board["uid"] == twin["uid"] + "-ch"
        by_id = {p["id"]: p for p in twin["panels"]}
        assert len(board["panels"]) >= len(twin["panels"]) - 3  # only the metrics-only measures are left out
        defined = {f"${v['name']}" for v in board["templating"]["list"]}
        for panel in board["panels"]:
            prom = by_id[panel["id"]]
            assert (panel["title"], panel["type"], panel["fieldConfig"]) == (prom["title"], prom["type"],
                                                                             prom["fieldConfig"])  # fmt: skip
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "clickhouse" and target["editorType"] == "sql"
                used = {f"${m}" for m in re.findall(r"\$\{?([a-z_]+)", target["rawSql"]) if not m.startswith("__")}
                assert used <= defined, f"{path.name}/{panel['title']}: undefined variable {used - defined}"


def _grafana_macros(sql: str) -> str:
    """The plugin's macros and variables as Grafana would expand them for the demo's spans."""
    sql = re.sub(r"\$__timeFilter\((\w+)\)", r"(\1 >= now() - INTERVAL 30 DAY AND \1 <= now() + INTERVAL 1 DAY)", sql)
    sql = re.sub(r"\$__timeInterval\((\w+)\)", r"toStartOfInterval(\1, INTERVAL 15 second)", sql)
    sql = sql.replace("$__interval_s", "15").replace("$price_per_mtok", "5")
    sql = sql.replace("${agent:singlequote}", "'demo-easy', 'demo-stalled', 'demo-struggling', 'demo-tool-error'")
    return sql.replace("${experiment:singlequote}", "'demo-experiment'")


def test_every_clickhouse_query_runs_on_the_exporters_schema(tmp_path: Path) -> None:
    """Each panel's, variable's and alert's SQL, run by ClickHouse's own engine (chdb) on the exporter's table
    holding the spans of a real demo run; the SKIP panel and the alert's query find the stalled run."""
    from rb_otel.analysis.sources import ChdbSource

    done = subprocess.run([sys.executable, "-m", "rb_otel.cli", "demo", "--out", str(tmp_path), "--experiment", "24"],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    source = ChdbSource(files=[tmp_path / "traces.jsonl"], database="otel")
    try:
        empty = []
        for name, sql in _clickhouse_queries():
            rows = source._rows(_grafana_macros(sql))
            if not rows:
                empty.append(name)
        skip = source._rows(_grafana_macros(next(q for n, q in _clickhouse_queries() if "(ClickHouse)" in n)))
    finally:
        source.close()
    assert empty == [], f"queries that found nothing in the demo's spans: {empty}"
    assert any(agent == "demo-stalled" and int(count) > 0 for agent, count in skip)


def test_alert_rules_have_summary_description_and_runbook() -> None:
    for rule in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]:
        assert {"summary", "description", "runbook", "runbook_url"} <= set(rule["annotations"]), rule["alert"]
    grafana = yaml.safe_load((ROOT / "grafana/provisioning/alerting/rb-otel-alerts.yaml").read_text())
    assert [r["title"] for r in grafana["groups"][0]["rules"]] == [a for a, _ in rule_exprs()]


CONTRIB = {
    "receivers": {"otlp", "prometheus", "hostmetrics", "filelog", "jaeger", "zipkin"},
    "processors": {
        "memory_limiter",
        "batch",
        "tail_sampling",
        "attributes",
        "resource",
        "filter",
        "transform",
        "probabilistic_sampler",
        "k8sattributes",
        "resourcedetection",
    },
    "exporters": {
        "otlp",
        "otlphttp",
        "prometheus",
        "prometheusremotewrite",
        "loadbalancing",
        "debug",
        "file",
        "kafka",
        "clickhouse",
    },
    "extensions": {"health_check", "pprof", "zpages", "basicauth", "bearertokenauth", "file_storage"},
}


@pytest.mark.parametrize(
    "config",
    [
        "collector/otelcol-contrib.yaml",
        "collector/gateway/agent-tier.yaml",
        "collector/gateway/sampling-tier.yaml",
        "collector/clickhouse.yaml",
        "collector/otelcol-persistent-queue.yaml",
    ],
)
def test_collector_configs_are_complete(config: str) -> None:
    cfg = yaml.safe_load((ROOT / config).read_text())
    service = cfg["service"]
    for name in service.get("extensions", []):
        assert name in cfg["extensions"], f"extension {name} not defined"
    for pipeline, spec in service["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            for name in spec.get(kind, []):
                assert name in cfg[kind], f"{pipeline}: {kind[:-1]} {name} not defined"
                assert name.split("/")[0] in CONTRIB[kind], f"{name} is not a contrib {kind[:-1]}"
    for kind in ("receivers", "exporters", "extensions"):
        for name, spec in (cfg.get(kind) or {}).items():
            for endpoint in re.findall(r"'endpoint': '([^']+)'", str(spec)):
                assert re.match(r"^((https?|tcp|clickhouse)://)?[\w.\-]+:\d+", endpoint), (
                    f"{name}: endpoint without host:port"
                )


def test_the_persistent_queue_config_keeps_refused_batches_on_disk() -> None:
    cfg = yaml.safe_load((ROOT / "collector/otelcol-persistent-queue.yaml").read_text())
    exporters = cfg["service"]["pipelines"]["traces"]["exporters"]
    assert exporters
    for name in exporters:
        spec = cfg["exporters"][name]
        storage = spec["sending_queue"]["storage"]
        assert spec["sending_queue"]["enabled"] and storage.split("/")[0] == "file_storage"
        assert storage in cfg["service"]["extensions"]  # defined is not enough: it must be started
        assert cfg["extensions"][storage]["directory"] and cfg["extensions"][storage].get("fsync") is True
        retry = spec["retry_on_failure"]
        assert retry["enabled"] and retry["max_elapsed_time"] in ("0", "0s")  # the disk bounds it, not a timer


def test_docker_compose_pins_images_and_has_no_default_password() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    for name, service in compose["services"].items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: unpinned image {image}"
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name}: {port} published beyond loopback"
    password = compose["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"]
    assert password.startswith("${GRAFANA_ADMIN_PASSWORD:?")


def test_promtool_checks_and_unit_tests() -> None:
    promtool = debian_binary("promtool", "prometheus")
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 5 rules found" in check.stdout
    unit = subprocess.run(
        [promtool, "test", "rules", "rb-otel.rules.test.yml"],
        cwd=RULES.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert unit.returncode == 0, unit.stdout + unit.stderr
    tests = yaml.safe_load((RULES.parent / "rb-otel.rules.test.yml").read_text())["tests"]
    tested = {check["alertname"] for t in tests for check in t["alert_rule_test"] if check["exp_alerts"]}
    assert tested == {a for a, _ in rule_exprs()}  # every alert has a firing case


# -- Prometheus and Alertmanager on the demo's real metrics --------------------------------------------------


def _demo_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return env


def test_prometheus_scrapes_the_demo_every_expression_has_data_and_skip_fires(tmp_path: Path) -> None:
    prometheus = debian_binary("prometheus", "prometheus")
    alertmanager = debian_binary("prometheus-alertmanager", "prometheus-alertmanager")
    demo_port, prom_port, am_port = free_port(), free_port(), free_port()
    (tmp_path / "am.yml").write_text("route:\n  receiver: default\nreceivers:\n  - name: default\n")
    (tmp_path / "prometheus.yml").write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
                "scrape_configs": [
                    {"job_name": "rb-otel", "static_configs": [{"targets": [f"127.0.0.1:{demo_port}"]}]}
                ],
            }
        )
    )
    demo = [
        sys.executable,
        "-m",
        "rb_otel.cli",
        "demo",
        "--out",
        str(tmp_path / "out"),
        "--quiet",
        "--prometheus-port",
        str(demo_port),
        "--repeat",
        str(DEMO_REPEAT),
        "--hold",
        "90",
        "--experiment",
        "6",
    ]
    am = [
        alertmanager,
        f"--config.file={tmp_path / 'am.yml'}",
        f"--storage.path={tmp_path / 'am'}",
        f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=",
    ]
    prom = [
        prometheus,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
    ]
    base = f"http://127.0.0.1:{prom_port}/api/v1"

    def query(expr: str) -> dict[str, Any]:
        body = urllib.parse.urlencode({"query": expr}).encode()
        return http_json(f"{base}/query", data=body)  # type: ignore[no-any-return]

    with (
        process(am, tmp_path / "am.log"),
        process(prom, tmp_path / "prom.log"),
        process(demo, tmp_path / "demo.log", env=_demo_env()),
    ):
        wait_until(lambda: query("rb_steps_total")["data"]["result"], timeout=60, what="the first scrape")
        wait_until(
            lambda: query('rb_runs_total{gen_ai_agent_name="demo-tool-error"}')["data"]["result"],
            timeout=60,
            what="all demo runs",
        )
        # The experiment runs after the scenarios: all of its runs, and two scrapes of what its dashboard reads.
        wait_until(
            lambda: (
                sum(
                    float(r["value"][1])
                    for r in query('rb_runs_total{gen_ai_agent_name="demo-experiment"}')["data"]["result"]
                )
                == 6
            ),
            timeout=60,
            what="the demo experiment's six runs",
        )
        wait_until(
            lambda: any(
                float(r["value"][1]) >= 2
                for r in query("count_over_time(rb_token_saving_chars_saved_total[1m])")["data"]["result"]
            ),
            timeout=60,
            what="two scrapes of the experiment's token-saving counter",
        )
        # Rates over [1m] need at least two samples of every series: poll for that, not a fixed sleep.
        wait_until(
            lambda: all(
                float(r["value"][1]) >= 2 for r in query("count_over_time(rb_steps_total[1m])")["data"]["result"]
            ),
            timeout=60,
            what="two scrapes of every rb_steps_total series",
        )
        # The values are the demo's: SKIP runs and steps per state against its own step logs.
        # The step logs hold the first round; the scripted rounds are identical, so metrics are that times the repeat.
        first_round = _demo_step_log_counts(tmp_path / "out" / "steplogs.jsonl")
        logged = {
            "skip_runs": first_round["skip_runs"] * DEMO_REPEAT,
            "steps_by_state": {k: v * DEMO_REPEAT for k, v in first_round["steps_by_state"].items()},
        }

        def scraped() -> dict[str, Any]:
            # the scenarios' runs (the step logs hold them); the experiment's runs are checked by its dashboard
            scenarios = 'gen_ai_agent_name!="demo-experiment"'
            skip_runs = query(f"sum(rb_runs_skip_total{{{scenarios}}})")["data"]["result"]
            by_state = query(f"sum by (rb_fsm_state) (rb_steps_total{{{scenarios}}})")["data"]["result"]
            return {
                "skip_runs": float(skip_runs[0]["value"][1]) if skip_runs else -1.0,
                "steps_by_state": {r["metric"]["rb_fsm_state"]: float(r["value"][1]) for r in by_state},
            }

        with contextlib.suppress(AssertionError):  # the scrape after the last run may still be due: poll, then diff
            wait_until(lambda: scraped() == logged, timeout=20, what="Prometheus to hold the demo's counts")
        assert scraped() == logged
        for where, expr in dashboard_exprs():
            answer = query(substitute(expr))
            assert answer["status"] == "success", where
            if not answer["data"]["result"]:
                # A scrape that a busy machine delays can leave a [$__range] increase one sample short for a moment:
                # poll a bounded while, and if it stays empty say what Prometheus held of each series it reads.
                try:
                    wait_until(lambda e=expr: query(substitute(e))["data"]["result"], timeout=30, what=where)
                except AssertionError:
                    held = {m: query(f"count_over_time({m}[10m])")["data"]["result"] for m in metric_names(expr)}
                    raise AssertionError(f"{where}: no data for {expr}; samples held: {held}") from None
        for alert, expr in rule_exprs():
            assert query(expr)["status"] == "success", alert
            for metric in metric_names(expr):
                selectors = re.findall(rf"\b{metric}(?:\{{[^}}]*\}})?", expr)
                for selector in selectors:
                    assert query(selector)["data"]["result"], f"{alert}: no data for {selector}"
        for variable in ("gen_ai_agent_name", "gen_ai_request_model"):
            values = http_json(f"{base}/label/{variable}/values")["data"]
            assert values, f"dashboard variable {variable} resolves to nothing"
        assert {"demo-easy", "demo-stalled"} <= set(http_json(f"{base}/label/gen_ai_agent_name/values")["data"])

        def skip_alert_firing() -> bool:
            alerts = http_json(f"http://127.0.0.1:{am_port}/api/v2/alerts")
            return any(
                a["labels"].get("alertname") == "RbOtelRunEnteredSkip"
                and a["labels"].get("gen_ai_agent_name") == "demo-stalled"
                and a["status"]["state"] == "active"
                for a in alerts
            )

        wait_until(skip_alert_firing, timeout=60, what="RbOtelRunEnteredSkip in Alertmanager")
        rules = http_json(f"{base}/rules")["data"]["groups"][0]["rules"]
        states = {r["name"]: r["state"] for r in rules}
        assert states["RbOtelRunEnteredSkip"] == "firing"
        assert states["RbOtelTelemetrySilent"] == "inactive"


DEMO_REPEAT = 2


def _demo_step_log_counts(path: Path) -> dict[str, Any]:
    """Runs that entered SKIP and steps per FSM state, from the demo's step logs (header line, then entries)."""
    skip_runs = 0
    steps: dict[str, float] = {}
    run_states: list[str] = []
    wait_until(path.exists, timeout=60, what=f"{path}")
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if "fsm_state" not in record:  # a run header
            skip_runs += "SKIP" in run_states
            run_states = []
            continue
        run_states.append(record["fsm_state"])
        steps[record["fsm_state"]] = steps.get(record["fsm_state"], 0.0) + 1
    skip_runs += "SKIP" in run_states
    return {"skip_runs": float(skip_runs), "steps_by_state": steps}


# -- rotel, the local collector ----------------------------------------------------------------------------


def test_rotel_receives_the_demo_over_otlp_grpc_and_forwards_it(
    tmp_path: Path, otlp_sink: tuple[int, list[Any]]
) -> None:
    agent = rotel_agent()
    sink_port, received = otlp_sink
    grpc_port, http_port = free_port(), free_port()
    rotel = [
        agent,
        "start",
        "--otlp-grpc-endpoint",
        f"127.0.0.1:{grpc_port}",
        "--otlp-http-endpoint",
        f"127.0.0.1:{http_port}",
        "--exporter",
        "otlp",
        "--otlp-exporter-endpoint",
        f"http://127.0.0.1:{sink_port}",
        "--otlp-exporter-protocol",
        "http",
        "--batch-timeout",
        "200ms",
    ]
    env = {
        **_demo_env(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{grpc_port}",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    with process(rotel, tmp_path / "rotel.log"):
        wait_until(lambda: _listening(grpc_port), timeout=20, what="rotel's gRPC receiver")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rb_otel.cli",
                "demo",
                "--out",
                str(tmp_path / "out"),
                "--scenario",
                "stalled",
                "--quiet",
            ],
            env=env,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0

        def spans() -> list[Any]:
            return [s for r in received for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]

        wait_until(lambda: any(s.name.startswith("invoke_agent") for s in spans()), timeout=30, what="forwarded spans")
    names_seen = [s.name for s in spans()]
    assert names_seen.count("invoke_agent demo-stalled") == 1
    assert sum(n.startswith("chat ") for n in names_seen) == 45
    root = next(s for s in spans() if s.name.startswith("invoke_agent"))
    attrs = {a.key: a.value for a in root.attributes}
    assert attrs["rb.max_state"].string_value == "SKIP" and attrs["rb.entered_skip"].bool_value
    assert all(s.trace_id == root.trace_id for s in spans() if not s.name.startswith("demo "))


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
