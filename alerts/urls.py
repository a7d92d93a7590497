from django.urls import path

from alerts import views

app_name = "alerts"
urlpatterns = [
    path("", views.SubscriptionListView.as_view(), name="subscription_list"),
    path("new/", views.subscription_create, name="subscription_create"),
    path("<int:pk>/edit/", views.subscription_edit, name="subscription_edit"),
    path("<int:pk>/delete/", views.subscription_delete, name="subscription_delete"),
    path("<int:pk>/test/", views.subscription_test, name="subscription_test"),
]
