from django.urls import path

from collectors import views

app_name = "collectors"
urlpatterns = [
    path("", views.HostListView.as_view(), name="host_list"),
    path("<int:pk>/", views.HostDetailView.as_view(), name="host_detail"),
    path("<int:pk>/metrics.json", views.host_metrics, name="host_metrics"),
    path("<int:pk>/tests/", views.host_test_start, name="host_test_start"),
    path("tests/<int:pk>/", views.host_test_detail, name="host_test_detail"),
    path("tests/<int:pk>/results/", views.host_test_results, name="host_test_results"),
    path("tests/<int:pk>/chart.json", views.host_test_chart, name="host_test_chart"),
    path("tests/<int:pk>/cancel/", views.host_test_cancel, name="host_test_cancel"),
    path("events/", views.EventListView.as_view(), name="event_list"),
    path("events/new/", views.log_change, name="event_create"),
]
