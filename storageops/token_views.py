"""The tokens page: a user creates API tokens (the secret is shown once) and revokes them."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from storageops.api import tokens
from storageops.models import APIToken


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. 'ansible on door hosts'.")
    role = forms.ChoiceField(choices=APIToken.ROLE_CHOICES, initial="viewer")
    expires_at = forms.DateTimeField(required=False, help_text="Optional, e.g. 2027-01-31 00:00.")


def token_list(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None)
    secret = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            token, secret = tokens.create_token(request.user, data["name"], data["role"], data["expires_at"])
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Token {token.prefix}… created. Copy it now: it is not shown again.")
    context = {
        "form": form,
        "secret": secret,
        "tokens": APIToken.objects.filter(user=request.user),
        "role": tokens.user_role(request.user),
    }
    return render(request, "storageops/tokens.html", context, status=400 if form.errors else 200)


@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(APIToken, pk=pk, user=request.user)
    tokens.revoke(token)
    messages.success(request, f"Token {token.prefix}… revoked.")
    return redirect("tokens")
