"""Events as Grafana annotations: pushed to Grafana's HTTP API, and served in the shape a
Grafana JSON datasource pulls.

Pushing is optional (STORAGEOPS_GRAFANA_URL and STORAGEOPS_GRAFANA_TOKEN). A run's end is
pushed as a region from its start to its end, so the run's span shows on every panel.
Tags say where an event belongs: site:, host:, backend:, endpoint:, kind:, run:; a run's end
also says how it ended (state:succeeded, state:partial, state:failed, state:cancelled), and its
text gives the counts ("Run X #5 partial: 38 ok, 2 failed, 6 skipped").
"""

from __future__ import annotations

import logging
import time

import requests
from celery import shared_task
from django.conf import settings
from django.db import transaction

from collectors import references
from collectors.models import Event

log = logging.getLogger(__name__)

ATTEMPTS = 3


def configured() -> bool:
    return bool(settings.STORAGEOPS_GRAFANA_URL and settings.STORAGEOPS_GRAFANA_TOKEN)


def _ms(value) -> int:
    return int(value.timestamp() * 1000)


def tags(event: Event) -> list[str]:
    _attach(event)
    out = [f"site:{settings.STORAGEOPS_SITE_NAME}", f"kind:{event.kind}"]
    if event.host_id:
        out.append(f"host:{event.host.name}")
    if event.backend_id:
        out.append(f"backend:{event.backend.name}")
    if event.endpoint_id:
        out.append(f"endpoint:{event.endpoint.name}")
    if event.run_id:
        out.append(f"run:{event.run_id}")
        if event.kind == "run_end":
            out.append(f"state:{event.run.state}")
            if status := _judgement(event).get("status"):
                out.append(f"judgement:{status}")
    return out


def _attach(event: Event) -> None:
    # An event alone (push, a test) gets its objects here; a page of them is attached at once.
    if "run" not in vars(event):
        references.attach([event])


def _judgement(event: Event) -> dict:
    return (event.run.summary or {}).get("judgement") or {} if event.run_id else {}


def annotation(event: Event) -> dict:
    """The annotation of an event in the shape of Grafana's POST /api/annotations (its
    backend, endpoint and run attached by collectors.references.attach)."""
    _attach(event)
    data = {"time": _ms(event.time), "tags": tags(event), "text": event.summary}
    if event.kind == "run_end" and (headline := _judgement(event).get("headline")):
        # The run against its own history, where the dashboards are: "Throughput regressed 23 %…".
        data["text"] = f"{event.summary}\n{headline}"
    if event.kind == "run_end" and event.run_id and event.run.started_at:
        data["time"] = _ms(event.run.started_at)
        data["timeEnd"] = _ms(event.run.finished_at or event.time)
    return data


def push(event: Event) -> int:
    """POST the event's annotation; retried a few times here, more by the task. Returns its id."""
    url = settings.STORAGEOPS_GRAFANA_URL.rstrip("/") + "/api/annotations"
    headers = {"Authorization": f"Bearer {settings.STORAGEOPS_GRAFANA_TOKEN}"}
    payload = annotation(event)
    delay = 0.5
    for attempt in range(1, ATTEMPTS + 1):
        try:
            response = requests.post(url, json=payload, headers=headers, timeout=10)
            if response.status_code < 500 and response.status_code != 429:
                response.raise_for_status()
                return response.json().get("id", 0)
            problem = f"HTTP {response.status_code}"
        except requests.ConnectionError as exc:
            problem = f"connection failed: {exc.__class__.__name__}"
        # The token is never logged; the URL and the status are enough to act on.
        log.warning("Grafana annotation for event %s: %s (attempt %d/%d)", event.pk, problem, attempt, ATTEMPTS)
        if attempt < ATTEMPTS:
            time.sleep(delay)
            delay *= 2
    raise requests.ConnectionError(f"Grafana did not take the annotation of event {event.pk}: {problem}")


def datasource_annotations(start, end, tag_filter: list[str] | None = None, limit: int = 1000) -> list[dict]:
    """Events between start and end in the JSON datasource's annotation shape."""
    events = Event.objects.filter(time__gte=start, time__lte=end).select_related("host")
    out = []
    for event in references.attach(events.order_by("time")[:limit]):
        item = annotation(event)
        if tag_filter and not set(tag_filter) <= set(item["tags"]):
            continue
        out.append({"title": event.get_kind_display(), **item})
    return out


@shared_task(
    name="collectors.grafana.push",
    autoretry_for=(requests.RequestException,),
    retry_backoff=5,
    retry_backoff_max=600,
    max_retries=8,
    soft_time_limit=120,
    time_limit=150,
)
def push_task(event_id: int) -> int:
    event = Event.objects.select_related("host").filter(pk=event_id).first()
    return push(references.attach([event])[0]) if event else 0


def on_event_saved(sender, instance: Event, created: bool, raw: bool = False, **kwargs) -> None:
    if created and not raw and configured():
        transaction.on_commit(lambda: push_task.delay(instance.pk))
