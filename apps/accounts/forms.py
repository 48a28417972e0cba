"""The sign-in forms (page and admin): a username longer than a username can be is a form error.

Django's AuthenticationForm sets the username's max_length only on the widget, so an over-long value reached
authenticate() and axes' failure record (a 255-character column: a 500 on PostgreSQL).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm


def _checked_username(form: forms.Form) -> str:
    username: str = form.cleaned_data.get("username") or ""
    field = form.fields["username"]
    limit = (field.max_length if isinstance(field, forms.CharField) else None) or 150
    if len(username) > limit:
        raise forms.ValidationError(f"A username has at most {limit} characters.", code="max_length")
    return username


class SignInForm(AuthenticationForm):
    def clean_username(self) -> Any:
        return _checked_username(self)


class AdminSignInForm(AdminAuthenticationForm):
    def clean_username(self) -> Any:
        return _checked_username(self)
