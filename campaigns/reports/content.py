"""What a run's report shows, gathered through the readers and registries the run page uses
(campaigns.results.readers, the chart registry's documents, the stored verdict and judgement):
a report never computes a figure of its own, so it cannot disagree with the page, and it reads
the run's summary, buckets and samples, never its transfer rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.utils import timezone

from campaigns import sweeps
from campaigns.models import Campaign, Run
from campaigns.results import analysis, comparison, disturbance, history, readers, verdicts
from campaigns.spec import RunSpec
from campaigns.web import chart_registry
from storageops.version import full_version

# Keys of a snapshot that name a secret or where one lies; a report leaves them out whatever
# the snapshot holds (the snapshot already drops tokens: this guards what a later field adds).
_SECRET_WORDS = ("token", "password", "secret", "credential", "x509", "proxy", "ca_dir", "cert", "private")
_KEPT = ("has_token",)


def is_secret(key: str) -> bool:
    name = key.lower()
    return name not in _KEPT and any(word in name for word in _SECRET_WORDS)


def public(mapping: dict[str, Any]) -> dict[str, Any]:
    """The mapping without the keys that name secrets (one level: snapshot values are flat)."""
    return {key: value for key, value in mapping.items() if not is_secret(key)}


def provenance(runs: list[Run], user: Any, now: datetime | None = None) -> dict:
    """Who made the report, when, of which runs (and who started each), with which StorageOps,
    at which site."""
    return {
        "version": full_version(),
        "site": settings.STORAGEOPS_SITE_NAME,
        "generated_at": now or timezone.now(),
        "generated_by": user.get_username() if user is not None and user.is_authenticated else "",
        "runs": [
            {"id": r.pk, "campaign": r.campaign.name, "state": r.state, "started_at": r.started_at,
             "finished_at": r.finished_at, "started_by": r.started_by_name}
            for r in runs
        ],
    }  # fmt: skip


def _endpoints(snapshot: dict, side: str) -> list[dict]:
    return [public({k: v for k, v in ep.items() if k != "hosts"}) for ep in snapshot.get(side, [])]


def frozen(run: Run) -> dict:
    """The parameters and set-up the run froze when it was created, secrets left out."""
    snapshot = run.snapshot or {}
    return {
        "parameters": public(snapshot.get("parameters", {})),
        "sources": _endpoints(snapshot, "sources"),
        "destinations": _endpoints(snapshot, "destinations"),
        "backends": [public(b) for b in snapshot.get("backends", [])],
        "versions": public(run.versions or {}),
    }


def run_report(run: Run, user: Any) -> dict:
    """The template context of one run's report; `documents` are its charts' data, by the URL
    the charts name (charts.js reads them from the file instead of fetching)."""
    swept = [(axis, sweeps.AXIS_LABELS[axis]) for axis in RunSpec.of(run).swept_axes]
    charts = chart_registry.run_page(run.pk, swept)
    urls = {url: name for chart in charts for name, url in chart.sources}
    documents = {url: chart_registry.run_document(run, name) for url, name in urls.items()}
    events_url = next((url for url, name in urls.items() if name == "events"), None)
    result = readers.stored(run)
    return {
        "kind": "run",
        "title": f"{run.campaign.name} run #{run.pk}",
        "provenance": provenance([run], user),
        "run": run,
        "result": result,
        "swept": swept,
        "charts": charts,
        "documents": documents,
        "events": [
            {**e, "at": datetime.fromtimestamp(e["time"] / 1000, UTC)}
            for e in (documents[events_url]["events"] if events_url else [])
        ],
        "verdict": (result or {}).get("verdict"),
        "judgement": (run.summary or {}).get("judgement"),
        "target_rate_bps": verdicts.target_rate_bps(run),
        "client_rows": analysis.client_rows(run.summary or {}),
        "disturbance": disturbance.left_out_note(run, result),
        "frozen": frozen(run),
    }


def comparison_report(compared: dict, user: Any) -> dict:
    """The template context of a comparison's report: `compared` is what the compare page shows
    (its table, runs, trim and "steps against" choice, its charts bound to their data's URLs);
    the charts' data is the page's, asked with the same trim and choice."""
    selected, trim = compared["runs"], compared["trim"]
    series = comparison.overlay_series(selected, trim, x=compared["x"])
    documents = {url: series for chart in compared["charts"] for _, url in chart.sources}
    ids = ", ".join(f"#{r.pk}" for r in selected)
    return {
        **compared,
        "kind": "comparison",
        "title": f"Comparison of runs {ids}",
        "provenance": provenance(selected, user),
        "documents": documents,
        "rows": compared["result"]["runs"],
        "frozen_runs": [{"run": r, **frozen(r)} for r in selected],
    }


def history_report(campaign: Campaign, user: Any) -> dict:
    """The template context of a campaign's history: the campaign page's history chart with the
    data of every figure it offers embedded (its figure choice works offline), each ended run's
    figure against the band it was judged with, the watch's standing, the latest run's set-up."""
    charts = chart_registry.campaign_page(campaign.pk)
    url = dict(charts[0].sources)["history"]
    table = history.baseline_table(campaign)
    shown = table["history"]
    # Keyed as charts.js asks: the figure encoded as encodeURIComponent encodes it.
    documents = {f"{url}?figure=throughput": shown}
    for choice in shown["figures"]:
        key = quote(choice["key"], safe="-_.!~*'()")
        documents[f"{url}?figure={key}"] = history.campaign_history(campaign, choice["key"])
    ids = [p["run"] for p in shown["points"]]
    runs = list(Run.objects.filter(pk__in=ids).select_related("campaign").order_by("finished_at"))
    latest = runs[-1] if runs else None
    return {
        "kind": "history",
        "title": f"{campaign.name}: history",
        "provenance": provenance(runs, user),
        "campaign": campaign,
        "charts": charts,
        "documents": documents,
        "points": table["rows"],
        "unit": table["unit"],
        "watch": history.watch(campaign),
        "frozen": frozen(latest) if latest else None,
        "latest": latest,
    }
