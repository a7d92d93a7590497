from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from storageops import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("campaigns/", include("campaigns.urls")),
    path("hosts/", include("collectors.urls")),
]
