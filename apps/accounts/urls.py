"""Company sign-in (OIDC): /oidc/authenticate/ starts it, /oidc/callback/ finishes it, /oidc/logout/ (POST) ends
both sessions. Names without a namespace: mozilla-django-oidc reverses `oidc_authentication_callback`."""

from django.urls import path

from apps.accounts import oidc

urlpatterns = [
    path("authenticate/", oidc.SignInStart.as_view(), name="oidc_authentication_init"),
    path("callback/", oidc.SignInCallback.as_view(), name="oidc_authentication_callback"),
    path("logout/", oidc.SignOut.as_view(), name="oidc_logout"),
]
