from django.contrib import admin, messages

from alerts import delivery
from alerts.models import Delivery, Subscription


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("name", "campaign", "kinds", "email", "webhook_url", "min_interval_minutes", "active")
    actions = ["send_test"]

    @admin.action(description="Send a test alert (not rate limited)")
    def send_test(self, request, queryset):
        for subscription in queryset:
            sent = delivery.send_test(subscription)
            level = messages.SUCCESS if sent.state == Delivery.State.SENT else messages.ERROR
            self.message_user(request, f"{subscription}: {sent.state}, {delivery.describe(sent)}", level)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("time", "subscription", "kind", "campaign", "state", "subject")
    list_filter = ("state", "kind")
    readonly_fields = [f.name for f in Delivery._meta.fields]
