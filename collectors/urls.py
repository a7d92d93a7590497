from django.urls import path

from collectors import views

app_name = "collectors"
urlpatterns = [
    path("", views.HostListView.as_view(), name="host_list"),
    path("<int:pk>/", views.HostDetailView.as_view(), name="host_detail"),
    path("<int:pk>/metrics.json", views.host_metrics, name="host_metrics"),
    path("events/", views.EventListView.as_view(), name="event_list"),
    path("events/new/", views.log_change, name="event_create"),
]
