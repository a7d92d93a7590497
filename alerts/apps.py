from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        from alerts.campaign_page import alert_counts
        from campaigns.web import campaign_extras
        from storageops.api import routes

        # alerts sits above campaigns: the campaign page hears of it through this registry.
        campaign_extras.register("alert_counts", alert_counts)
        routes.register_viewset("alert-subscriptions", "alerts.api.SubscriptionViewSet")
        routes.register_viewset("alert-deliveries", "alerts.api.DeliveryViewSet")
