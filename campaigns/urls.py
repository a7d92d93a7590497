from django.urls import path

from campaigns.web import baseline_views, compare_views, readiness_views, run_views, status_views, views

app_name = "campaigns"
urlpatterns = [
    path("", views.CampaignListView.as_view(), name="campaign_list"),
    path("new/", views.campaign_create, name="campaign_create"),
    path("<int:pk>/", views.CampaignDetailView.as_view(), name="campaign_detail"),
    path("<int:pk>/history.json", views.campaign_history_data, name="campaign_history"),
    path("<int:pk>/schedule/", views.campaign_schedule, name="campaign_schedule"),
    path("<int:pk>/edit/", views.campaign_edit, name="campaign_edit"),
    path("<int:pk>/clone/", views.campaign_clone, name="campaign_clone"),
    path("<int:pk>/start/", views.campaign_start, name="campaign_start"),
    path("<int:pk>/new-normal/", baseline_views.campaign_new_normal, name="campaign_new_normal"),
    path("runs/", run_views.RunListView.as_view(), name="run_list"),
    path("runs/<int:pk>/", run_views.RunDetailView.as_view(), name="run_detail"),
    path("runs/<int:pk>/progress/", run_views.run_progress, name="run_progress"),
    path("runs/<int:pk>/cancel/", run_views.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/retry-failed/", run_views.run_retry_failed, name="run_retry_failed"),
    path("runs/<int:pk>/baseline/", baseline_views.run_baseline, name="run_baseline"),
    path("runs/<int:pk>/judge-again/", baseline_views.run_judge_again, name="run_judge_again"),
    path("runs/<int:pk>/transfers/", run_views.run_transfers, name="run_transfers"),
    path("runs/<int:pk>/errors/<str:category>/", run_views.run_errors, name="run_errors"),
    path("runs/<int:pk>/charts/<str:name>.json", run_views.run_chart, name="run_chart"),
    path("status/", status_views.status_page, name="status"),
    path("compare/", compare_views.compare_page, name="compare"),
    path("compare/data.json", compare_views.compare_data, name="compare_data"),
    path("backends/", views.BackendListView.as_view(), name="backend_list"),
    path("backends/<int:pk>/", views.BackendDetailView.as_view(), name="backend_detail"),
    path("endpoints/<int:pk>/", views.EndpointDetailView.as_view(), name="endpoint_detail"),
    path("endpoints/<int:pk>/readiness/", readiness_views.readiness_start, name="readiness_start"),
    path("readiness/<int:pk>/", readiness_views.readiness_detail, name="readiness_detail"),
    path("readiness/<int:pk>/cancel/", readiness_views.readiness_cancel, name="readiness_cancel"),
    path("readiness/grid/", readiness_views.readiness_grid_page, name="readiness_grid"),
    path("readiness/grid/<int:pk>/", readiness_views.readiness_grid_page, name="readiness_grid_detail"),
    path("readiness/grid/start/", readiness_views.readiness_grid_start, name="readiness_grid_start"),
    path("readiness/grid/schedule/", readiness_views.readiness_grid_schedule, name="readiness_grid_schedule"),
]
