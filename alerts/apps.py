from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        from alerts.campaign_page import alert_counts
        from campaigns.web import campaign_extras
        from storageops import alerting, schedules
        from storageops.api import routes

        # alerts sits above campaigns: the campaign page hears of it through this registry.
        campaign_extras.register("alert_counts", alert_counts)
        routes.register_viewset("alert-subscriptions", "alerts.api.SubscriptionViewSet")
        routes.register_viewset("alert-deliveries", "alerts.api.DeliveryViewSet")
        # The moments the lower apps tell (storageops.alerting), each heard by a task of ours.
        for moment in ("run_finished", "run_stalled", "readiness_grid_failed", "disk_full"):
            alerting.listen(moment, f"alerts.{moment}")
        schedules.register("StorageOps: alert on collectors gone silent", "alerts.collectors_silent", 60)
