"""Authentication and permissions shared by every API view.

Browsers use their session; automation sends `Authorization: Token <secret>`. A request
made with a token may do what the token's role allows *and* its owner may do. With single
sign-on set up, `Authorization: Bearer <JWT>` from the provider is checked by
storageops.oidc.bearer (the user's roles, from the token's groups).
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, permissions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from storageops.api import tokens
from storageops.models import APIToken


class TokenAuthentication(BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in (b"token", b"bearer"):
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Send 'Authorization: Token <secret>'.")
        if settings.STORAGEOPS_OIDC and parts[1].count(b".") == 2:
            return None  # a JWT (our secrets have no dots): the provider's token, for the next class
        token = tokens.resolve(parts[1].decode(errors="replace"))
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown, revoked or expired token.")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword


def has_perm(request, perm: str) -> bool:
    user = request.user
    if not user or not user.is_authenticated or not user.has_perm(perm):
        return False
    if isinstance(request.auth, APIToken):
        cache = getattr(request, "_token_perms", None)
        if cache is None:
            cache = request._token_perms = tokens.role_permissions(request.auth.role)
        return perm in cache
    return True


class RolePermission(permissions.BasePermission):
    """Reads need the model's view permission, writes its add/change/delete permission;
    a view can name other permissions for its actions in `action_permissions`."""

    _METHOD = {"POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        action_perms = getattr(view, "action_permissions", {})
        if getattr(view, "action", None) in action_perms:
            return all(has_perm(request, p) for p in action_perms[view.action])
        if not hasattr(view, "get_queryset"):
            # A view of no model (the API root): reading it needs a role, as every page does.
            return request.method in permissions.SAFE_METHODS and tokens.user_role(request.user) is not None
        # The class's queryset names the model without building the view's own (its
        # annotations and prefetches are built again by the view itself).
        queryset = getattr(view, "queryset", None)
        model = (queryset if queryset is not None else view.get_queryset()).model
        verb = "view" if request.method in permissions.SAFE_METHODS else self._METHOD.get(request.method)
        if verb is None:
            return False
        return has_perm(request, f"{model._meta.app_label}.{verb}_{model._meta.model_name}")


class TokenScheme(OpenApiAuthenticationExtension):
    """Describes token authentication in the OpenAPI schema."""

    target_class = "storageops.api.auth.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <secret>`: create a token in the dashboard; its secret is shown once.",
        }
