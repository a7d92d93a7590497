"""Host and event pages (thin: queries and templates only)."""

from __future__ import annotations

from django.views.generic import DetailView, ListView

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
