"""The experiment report as a readable table (``rb-otel ab-report`` without ``--json``)."""

from __future__ import annotations

from typing import Any

__all__ = ["format_report"]


def _num(value: Any, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:+.0%}"


def format_report(report: dict[str, Any]) -> str:
    """The report's arms side by side, the comparison, the sample-ratio check and the caveats."""
    arms, comparison, srm = report["arms"], report["comparison"], report["srm"]
    on, off = arms["on"], arms["off"]
    rows = [
        ("runs (units)", f"{on['n_runs']} ({on['n_units']})", f"{off['n_runs']} ({off['n_units']})", ""),
        (
            "success / failure / other",
            "{success} / {failure} / {other}".format(**on["outcomes"]),
            "{success} / {failure} / {other}".format(**off["outcomes"]),
            "",
        ),
        ("success rate", _num(on["success_rate"], ".1%"), _num(off["success_rate"], ".1%"), ""),
        (
            "tokens per run (median)",
            _num(on["tokens_per_run"]["median"]),
            _num(off["tokens_per_run"]["median"]),
            _pct(comparison["tokens_per_run_median"]["pct"]),
        ),
        (
            "tokens per run (winsorized mean)",
            _num(on["tokens_per_run"]["winsorized_mean"]),
            _num(off["tokens_per_run"]["winsorized_mean"]),
            "",
        ),
        ("steps per run (median)", _num(on["steps_per_run"]["median"]), _num(off["steps_per_run"]["median"]), ""),
        (
            "cost per run (USD)",
            _num(on["cost"].get("cost_per_run_usd"), ".4f"),
            _num(off["cost"].get("cost_per_run_usd"), ".4f"),
            _pct(comparison["cost_per_run_usd"]["pct"]),
        ),
        (
            "chars saved per run",
            _num(on["token_saving"]["chars_saved_per_run"]),
            _num(off["token_saving"]["chars_saved_per_run"]),
            "",
        ),
    ]
    widths = [max(len(r[i]) for r in [("", "on", "off", "on vs off"), *rows]) for i in range(4)]
    lines = [f"experiment {report['experiment_id']}", ""]
    for row in [("", "on", "off", "on vs off"), *rows]:
        lines.append(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    rate = comparison["success_rate"]
    lines.append("")
    if rate["delta"] is None:
        lines.append("success rate difference: not enough finished runs in both arms")
    else:
        lo, hi = rate["ci_95"]
        lines.append(
            f"success rate difference (on - off): {rate['delta']:+.1%}, 95% CI {lo:+.1%} .. {hi:+.1%} (Newcombe)"
        )
    strat = comparison["success_rate_stratified"]
    if "delta" in strat and len(strat["strata"]) > 1:
        lo, hi = strat["ci_95"]
        lines.append(f"stratified by task profile: {strat['delta']:+.1%}, 95% CI {lo:+.1%} .. {hi:+.1%}")
    verdict = "MISMATCH" if srm["flagged"] else "ok"
    lines.append(
        f"sample ratio: {srm['observed']['on']} on / {srm['observed']['off']} off units, expected "
        f"{srm['expected']['on']:.1f} / {srm['expected']['off']:.1f}; chi2 {srm['chi_square']:.2f}, "
        f"p {srm['p_value']:.3g}: {verdict}"
    )
    if report["caveats"]:
        lines += ["", "caveats:"] + [f"  - {c}" for c in report["caveats"]]
    return "\n".join(lines)
