"""Alert subscriptions and their deliveries in the API, for sites that keep their configuration
as code; the pages (alerts.views) and the admin manage the same objects with the same rules."""

from __future__ import annotations

from django.core.exceptions import NON_FIELD_ERRORS
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from alerts import delivery
from alerts.models import NOT_SUBSCRIBABLE, AlertKind, Delivery, Subscription, shown_url, validate_kinds
from storageops.api.auth import RolePermission, has_perm
from storageops.api.base import BaseModelSerializer, BaseViewSet, FieldsBuiltOnce
from storageops.api.pagination import MAX_LIMIT

SEES_WEBHOOKS = "alerts.change_subscription"
SUBSCRIBABLE = [kind.value for kind in AlertKind if kind not in NOT_SUBSCRIBABLE]


@extend_schema_field(
    {"type": "array", "items": {"type": "string", "enum": SUBSCRIBABLE}, "minItems": 1},
)
class KindsField(serializers.JSONField):
    """A list checked by the model's own validate_kinds, so the API refuses what the pages refuse."""


class SubscriptionSerializer(BaseModelSerializer):
    """Who is told what: email and/or webhook (at least one), for a campaign or every campaign."""

    kinds = KindsField(
        required=False, validators=[validate_kinds],
        help_text="The kinds of alert to send (test is the test action's, not subscribable; regression brings "
        "its recoveries); default all.",
    )  # fmt: skip

    class Meta:
        model = Subscription
        route = "alert-subscriptions"
        fields = [
            "id",
            "url",
            "display",
            "name",
            "campaign",
            "kinds",
            "email",
            "webhook_url",
            "min_interval_minutes",
            "repeat_ongoing_hours",
            "active",
            "created",
            "last_updated",
        ]
        read_only_fields = ["created", "last_updated"]
        extra_kwargs = {
            "webhook_url": {
                "help_text": "A Mattermost or Slack incoming webhook. Its path is its secret: it is shown as "
                "scheme://host/… to whoever may not change subscriptions."
            },
        }

    def to_representation(self, obj: Subscription) -> dict:
        data = super().to_representation(obj)
        request = self.context.get("request")
        # Without a request nobody is known to be allowed: the secret stays hidden.
        if obj.webhook_url and not (request is not None and has_perm(request, SEES_WEBHOOKS)):
            data["webhook_url"] = shown_url(obj.webhook_url)
        return data

    def validate(self, attrs: dict) -> dict:
        try:
            return super().validate(attrs)
        except serializers.ValidationError as exc:
            # The model refuses "neither email nor webhook" as a whole; a client is told which
            # fields would fix it rather than an anonymous object error.
            whole = exc.detail.pop(NON_FIELD_ERRORS, None) if isinstance(exc.detail, dict) else None
            if whole:
                for field in ("email", "webhook_url"):
                    exc.detail.setdefault(field, []).extend(whole)
            raise


class DeliverySerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """One alert to one subscription: sent, failed (each channel's error) or held back by the rate limit."""

    outcome = serializers.JSONField(
        read_only=True,
        help_text="Per channel (email, webhook): ok, or the error it met (a webhook named by its host only); "
        "a held-back delivery names the delivery that held it: held_back_by.",
    )

    class Meta:
        model = Delivery
        fields = ["id", "subscription", "kind", "campaign", "run", "host", "time", "subject", "body", "state",
                  "outcome"]  # fmt: skip
        read_only_fields = fields


class SubscriptionViewSet(BaseViewSet):
    """Alert subscriptions: everyone reads them, admins change and test them."""

    queryset = Subscription.objects.all()
    serializer_class = SubscriptionSerializer
    filterset_fields = ["campaign", "active"]
    action_permissions = {"test": [SEES_WEBHOOKS]}

    @extend_schema(request=None, responses={200: DeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Send a test alert through every channel of the subscription now (never held back) and wait
        for the channels' answers: 200 with the delivery, sent or failed; its state and outcome say which."""
        sent = delivery.send_test(self.get_object())
        return Response(DeliverySerializer(sent, context=self.get_serializer_context()).data)


class DeliveryCursor(CursorPagination):
    # Deliveries are never pruned: keyset pages cost the same a year deep as on the first page.
    ordering = "-time"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = MAX_LIMIT


class DeliveryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """What was sent, failed or held back, newest first."""

    queryset = Delivery.objects.all()
    serializer_class = DeliverySerializer
    permission_classes = [RolePermission]
    pagination_class = DeliveryCursor
    filterset_fields = ["subscription", "kind", "state", "campaign", "run"]
