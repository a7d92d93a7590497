"""Host and event pages (thin: queries and templates only)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.generic import DetailView, ListView

from collectors.events import log_event
from collectors.forms import EventForm
from collectors.models import Event, Host


class HostListView(ListView):
    model = Host


class HostDetailView(DetailView):
    model = Host


class EventListView(ListView):
    model = Event
    paginate_by = 100

    def get_queryset(self):
        return Event.objects.select_related("host", "backend", "endpoint", "run")


@permission_required("collectors.add_event", raise_exception=True)
def log_change(request: HttpRequest) -> HttpResponse:
    """An operator logs a change, a note or a deploy: it joins the events on every chart."""
    form = EventForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        event = log_event(
            data["kind"], data["summary"], source="operator", time=data["time"], host=data["host"],
            backend=data["backend"], endpoint=data["endpoint"], user=request.user, detail=data["detail"],
        )  # fmt: skip
        messages.success(request, f"Logged: {event.summary}")
        return redirect("collectors:event_list")
    return render(request, "collectors/event_form.html", {"form": form}, status=400 if form.errors else 200)
