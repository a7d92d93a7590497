"""The home page, "/": included by storageops.urls by name (a dotted string, not an import)."""

from django.urls import path

from campaigns.web import views

urlpatterns = [path("", views.home, name="home")]
