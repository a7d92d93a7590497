"""The Alerts pages: subscriptions and their deliveries; editing and testing are the admin's."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_POST
from django.views.generic import ListView

from alerts import delivery
from alerts.forms import DeliveryFilterForm, SubscriptionForm
from alerts.models import Delivery, Subscription


@method_decorator(permission_required("alerts.view_subscription", raise_exception=True), name="dispatch")
class SubscriptionListView(ListView):
    """The subscriptions, and the latest deliveries below them, paginated and filtered."""

    template_name = "alerts/subscription_list.html"
    context_object_name = "deliveries"
    paginate_by = 50

    def get_queryset(self):
        self.filters = DeliveryFilterForm(self.request.GET)
        return self.filters.deliveries() if self.filters.is_valid() else Delivery.objects.none()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["filters"] = self.filters
        context["subscriptions"] = self.filters.subscriptions()
        query = self.request.GET.copy()
        query.pop("page", None)
        context["query"] = query.urlencode()
        return context

    def render_to_response(self, context, **kwargs):
        return super().render_to_response(context, status=400 if self.filters.errors else 200, **kwargs)


def _posted(request: HttpRequest) -> QueryDict | None:
    # Bound on every POST, an empty one too: it is refused with the fields it lacks, not shown blank.
    return request.POST if request.method == "POST" else None


def _form_page(request: HttpRequest, form: SubscriptionForm, title: str) -> HttpResponse:
    context = {"form": form, "title": title}
    return render(request, "alerts/subscription_form.html", context, status=400 if form.errors else 200)


@permission_required("alerts.add_subscription", raise_exception=True)
def subscription_create(request: HttpRequest) -> HttpResponse:
    form = SubscriptionForm(_posted(request))
    if form.is_bound and form.is_valid():
        subscription = form.save()
        messages.success(request, f"Subscription {subscription.name} created.")
        return redirect("alerts:subscription_list")
    return _form_page(request, form, "New alert subscription")


@permission_required("alerts.change_subscription", raise_exception=True)
def subscription_edit(request: HttpRequest, pk: int) -> HttpResponse:
    subscription = get_object_or_404(Subscription, pk=pk)
    title = f"Edit {subscription.name}"  # before the form writes the posted name into the instance
    form = SubscriptionForm(_posted(request), instance=subscription)
    if form.is_bound and form.is_valid():
        form.save()
        messages.success(request, f"Subscription {subscription.name} saved.")
        return redirect("alerts:subscription_list")
    return _form_page(request, form, title)


@require_POST
@permission_required("alerts.delete_subscription", raise_exception=True)
def subscription_delete(request: HttpRequest, pk: int) -> HttpResponse:
    subscription = get_object_or_404(Subscription, pk=pk)
    subscription.delete()
    messages.success(request, f"Subscription {subscription.name} deleted, with its deliveries.")
    return redirect("alerts:subscription_list")


@require_POST
@permission_required("alerts.change_subscription", raise_exception=True)
def subscription_test(request: HttpRequest, pk: int) -> HttpResponse:
    # Synchronous on purpose: whoever presses the button waits for the channels' answers.
    subscription = get_object_or_404(Subscription, pk=pk)
    sent = delivery.send_test(subscription)
    if sent.state == Delivery.State.SENT:
        messages.success(request, f"Test alert sent for {subscription.name}: {delivery.describe(sent)}.")
    else:
        messages.error(request, f"Test alert for {subscription.name} failed: {delivery.describe(sent)}.")
    return redirect("alerts:subscription_list")
