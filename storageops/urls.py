from django.contrib import admin
from django.urls import include, path

from storageops import metrics, token_views, views
from storageops.access import role_not_required
from storageops.oidc import views as sso

# The apps' pages are included by dotted name, as ROOT_URLCONF and INSTALLED_APPS name modules:
# Django imports them when it first resolves a URL, and storageops imports no app.
urlpatterns = [
    path("", include("campaigns.home_urls")),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("tokens/", token_views.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", token_views.token_revoke, name="token_revoke"),
    path("login/", sso.LoginPage.as_view(), name="login"),
    path("logout/", role_not_required(sso.sign_out), name="logout"),
    # Single sign-on (404 unless STORAGEOPS_OIDC_ISSUER is set); the provider redirects back to /oidc/callback/.
    path("oidc/sign-in/", sso.sign_in, name="oidc_sign_in"),
    path("oidc/callback/", sso.callback, name="oidc_callback"),
    path("admin/", admin.site.urls),
    # DRF answers 401/403 itself: no login redirect for machine clients.
    path("api/v1/grafana/", include("collectors.grafana_urls")),
    path("api/", include("storageops.api.urls")),
    path("campaigns/", include("campaigns.urls")),
    path("hosts/", include("collectors.urls")),
    path("alerts/", include("alerts.urls")),
]

handler400 = "storageops.api.errors.bad_request"
handler403 = "storageops.api.errors.permission_denied"
handler404 = "storageops.api.errors.page_not_found"
handler500 = "storageops.api.errors.server_error"
