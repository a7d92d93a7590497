from django.urls import path

from campaigns import views

app_name = "campaigns"
urlpatterns = [
    path("", views.CampaignListView.as_view(), name="campaign_list"),
    path("<int:pk>/", views.CampaignDetailView.as_view(), name="campaign_detail"),
    path("<int:pk>/schedule/", views.campaign_schedule, name="campaign_schedule"),
    path("runs/", views.RunListView.as_view(), name="run_list"),
    path("runs/<int:pk>/", views.RunDetailView.as_view(), name="run_detail"),
    path("runs/<int:pk>/progress/", views.run_progress, name="run_progress"),
    path("backends/", views.BackendListView.as_view(), name="backend_list"),
    path("backends/<int:pk>/", views.BackendDetailView.as_view(), name="backend_detail"),
    path("endpoints/<int:pk>/", views.EndpointDetailView.as_view(), name="endpoint_detail"),
]
