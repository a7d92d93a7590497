"""Reachability checks of the database and the broker, for /healthz and the CLI."""

from __future__ import annotations

import time

from django.db import connection


def check_database() -> dict:
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "unreachable", with its reason
        return {"ok": False, "error": str(exc)[:300]}
    return {"ok": True, "ms": round(1000 * (time.monotonic() - started), 1)}


def check_broker(timeout: float = 3.0) -> dict:
    from storageops.celery import app

    started = time.monotonic()
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            transport = conn.transport_cls
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": str(exc)[:300]}
    return {"ok": True, "transport": str(transport), "ms": round(1000 * (time.monotonic() - started), 1)}


def health() -> tuple[bool, dict]:
    report = {"database": check_database(), "broker": check_broker()}
    ok = all(part["ok"] for part in report.values())
    report["status"] = "ok" if ok else "unavailable"
    return ok, report
