"""`tickwork stats`: the tenant's health."""

from __future__ import annotations

from typing import Any

import typer

from tickwork_local.cli.jobs import as_json
from tickwork_local.cli.options import OutputOption, examples
from tickwork_local.cli.output import Cell, format_seconds, text
from tickwork_local.cli.session import Session, command

EPILOG = examples(
    "tickwork stats",
    "tickwork stats -o json | jq .queue_depth",
)


def stats(ctx: typer.Context, output: OutputOption = None) -> None:
    """Show the tenant's health.

    Jobs by status, runs by status over the last hour, trigger lag percentiles and queue depth; each
    pool's runs waiting for a claim, with how long the oldest has waited; and flow control: the tenant's
    limits with its running, waiting and throttled runs, and each concurrency key's."""
    session = Session(ctx, output)
    document = as_json(session.client.stats())
    if session.output.machine:
        session.output.document(document)
        return

    def counts(value: Any, *, all_of_them: bool) -> str:
        if not isinstance(value, dict):
            return text(value)
        shown = [f"{text(name)} {text(count)}" for name, count in value.items() if all_of_them or count]
        return ", ".join(shown) or "none"

    lag = document.get("trigger_lag_ms") if isinstance(document.get("trigger_lag_ms"), dict) else {}
    assert isinstance(lag, dict)
    window = document.get("window_seconds")
    span = format_seconds(window) if isinstance(window, int) else text(window)
    lags = ", ".join(f"{name} {text(lag.get(name))}" for name in ("p50", "p95", "p99"))
    pairs: list[tuple[str, Cell]] = [
        ("jobs", counts(document.get("jobs"), all_of_them=True)),
        (f"runs (last {span})", counts(document.get("runs"), all_of_them=False)),
        ("trigger lag (ms)", f"{lags} (sampled runs: {text(document.get('sampled_runs'))})"),
        ("queue depth", text(document.get("queue_depth"))),
    ]
    session.output.fields(pairs)
    pools = [pool for pool in document.get("pools") or [] if isinstance(pool, dict)]
    if pools:
        session.output.line()
        session.output.line("pools (runs waiting for a claim):")
        headers = ["POOL", "WAITING", "OLDEST_WAIT", "WAITING_SINCE"]
        session.output.table(headers, pool_rows(pools), empty="none")
    flow = document.get("flow")
    if isinstance(flow, dict):
        session.output.line()
        session.output.line("flow control:")
        session.output.table(
            ["LIMIT", "SETTING", "RUNNING", "WAITING", "THROTTLED"], flow_rows(flow), empty="none"
        )


def flow_rows(flow: dict[str, Any]) -> list[list[Cell]]:
    """The tenant's row (its limits; running from its in-flight slots, or marked ~ when from sampled runs),
    then a row per concurrency key."""

    def limit(value: Any) -> str:
        return "none" if value is None else text(value)

    def waiting(counts: dict[str, Any]) -> str:
        return f"{text(counts.get('waiting'))}{'+' if counts.get('waiting_capped') else ''}"

    rate = flow.get("max_runs_per_second")
    throttle = "none" if rate is None else f"{text(rate)}/s, burst {text(flow.get('burst') or rate)}"
    setting = f"max {limit(flow.get('max_concurrent_runs'))}, throttle {throttle}"
    if flow.get("disabled"):
        setting += ", DISABLED"
    running = text(flow.get("running"))
    if flow.get("running_from") == "sampled_runs":
        running = f"~{running}"
    rows: list[list[Cell]] = [["tenant", setting, running, waiting(flow), text(flow.get("throttled"))]]
    for key in flow.get("keys") or []:
        if isinstance(key, dict):
            rows.append(
                [
                    f"key {text(key.get('key'))}",
                    f"max {text(key.get('max_concurrency'))}",
                    text(key.get("running")),
                    waiting(key),
                    "-",
                ]
            )
    return rows


def pool_rows(pools: list[dict[str, Any]]) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for pool in pools:
        waiting = f"{text(pool.get('waiting'))}{'+' if pool.get('waiting_capped') else ''}"
        wait = pool.get("oldest_wait_seconds")
        rows.append(
            [
                text(pool.get("pool")),
                waiting,
                format_seconds(round(wait)) if isinstance(wait, int | float) else "-",
                text(pool.get("oldest_waiting_since")),
            ]
        )
    return rows


def register(app: typer.Typer) -> None:
    app.command("stats", epilog=EPILOG, rich_help_panel="Schedules and health")(command(stats))
