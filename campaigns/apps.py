from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


def _event_saved(sender, instance, created, raw=False, **kwargs) -> None:
    if created and not raw:
        from campaigns.results.disturbance import on_event

        on_event(instance)


def _schedule_deleted(sender, instance, **kwargs) -> None:
    from campaigns.runs.scheduling import forget_periodic_task

    forget_periodic_task(instance)


class CampaignsConfig(AppConfig):
    name = "campaigns"
    verbose_name = "Campaigns"

    def ready(self) -> None:
        # However an event enters the log (collector, admin, API), the runs it disturbs know.
        post_save.connect(_event_saved, sender="collectors.Event", dispatch_uid="campaigns-event-disturbs")
        # However a schedule goes (its page, the API, its campaign deleted), beat's task goes too.
        post_delete.connect(
            _schedule_deleted, sender="campaigns.CampaignSchedule", dispatch_uid="campaigns-schedule-task"
        )
        _register_with_lower_floors()


# The API's viewsets (storageops.api.routes), by dotted path: imported when a URL is resolved.
API_VIEWSETS = {
    "backends": "BackendViewSet",
    "endpoints": "EndpointViewSet",
    "campaigns": "CampaignViewSet",
    "schedules": "CampaignScheduleViewSet",
    "token-issuers": "TokenIssuerViewSet",
    "runs": "RunViewSet",
    "readiness-checks": "ReadinessCheckViewSet",
    "transfers": "TransferViewSet",
}


def _register_with_lower_floors() -> None:
    """What storageops and collectors, below campaigns, learn of it: they import no campaigns
    code, campaigns fills their registries (NetBox's register_* idea)."""
    from campaigns.metrics import RunsCollector
    from campaigns.models import Backend, Campaign, Endpoint, Run, TokenIssuer
    from campaigns.runs.live_hosts import involved_in_a_live_run
    from campaigns.runs.scheduling import SCHEDULED_START_TASK
    from collectors import live, references
    from storageops import beat, changelog, metrics, retention, schedules
    from storageops.api import routes

    changelog.register(Backend, Endpoint, Campaign, TokenIssuer)
    schedules.register("StorageOps: recover runs whose driver died", "campaigns.recover_runs", 15)
    beat.tell_due_time(SCHEDULED_START_TASK)
    live.register(involved_in_a_live_run)
    metrics.register("campaigns", RunsCollector())
    retention.register("campaigns", "campaigns.results.retention.apply_retention")
    for prefix, name in API_VIEWSETS.items():
        routes.register_viewset(prefix, f"campaigns.api.views.{name}")
    routes.register_view("compare/", "campaigns.api.views.ComparisonView", "compare")
    routes.register_view("campaigns/<int:pk>/report.html", "campaigns.api.views.CampaignReportView", "campaign-report")
    routes.register_view(
        "campaigns/<int:pk>/report.pdf", "campaigns.api.views.CampaignReportPdfView", "campaign-report-pdf"
    )
    routes.register_view("compare/report.html", "campaigns.api.views.ComparisonReportView", "compare-report")
    routes.register_view("compare/report.pdf", "campaigns.api.views.ComparisonReportPdfView", "compare-report-pdf")
    routes.register_view("runs/<int:pk>/report.html", "campaigns.api.views.RunReportView", "run-report")
    routes.register_view("runs/<int:pk>/report.pdf", "campaigns.api.views.RunReportPdfView", "run-report-pdf")
    # Events name backends, endpoints and runs by id; these turn the ids into objects, in bulk.
    references.register("backend", _resolver(Backend.objects.all(), "name", offered=True))
    references.register("endpoint", _resolver(Endpoint.objects.all(), "name", offered=True))
    references.register("run", _resolver(Run.objects.select_related("campaign"), "campaign__name", offered=False))


def _resolver(objects, name_field: str, offered: bool):
    """Ids to objects in one query; a name to ids (a run by its campaign's name); the choices
    of the event form (backends and endpoints, by name; runs are never offered)."""
    from collectors.references import Resolver

    return Resolver(
        by_ids=lambda ids: objects.in_bulk(ids),
        ids_named=lambda name: list(objects.filter(**{name_field: name}).values_list("pk", flat=True)),
        choices=lambda: [(o.pk, str(o)) for o in objects.order_by("name")] if offered else [],
    )
