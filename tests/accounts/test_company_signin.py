"""Company sign-in against a real OpenID Connect provider on loopback (panva's oidc-provider in a node process):
sign-in, groups -> teams and roles, a removed group removing access at the next sign-in, a tampered or expired
ID token refused, logout at both ends, local accounts turned off (issue 23)."""

from __future__ import annotations

import copy
import html
import re
from datetime import timedelta
from urllib.parse import urljoin

import jwt
import pytest
import requests
import time_machine
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.core.exceptions import SuspiciousOperation

from apps.accounts import oidc
from apps.accounts.selectors import FINANCE_GROUP
from tests.harness.oidc_provider import CLIENT_ID, CLIENT_SECRET, start_oidc_provider

BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend",
            "apps.accounts.oidc.IdentityProviderBackend"]


@pytest.fixture
def provider(live_server, tmp_path, settings):
    idp = start_oidc_provider(tmp_path, live_server.url)
    settings.GPUFINOPS_OIDC_ISSUER = idp.issuer
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    settings.ALLOWED_HOSTS = ["*"]
    policy = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)
    policy["DIRECTIVES"]["form-action"].append(idp.issuer)  # as settings.py does for a configured issuer
    settings.CONTENT_SECURITY_POLICY = policy
    oidc._discovered.clear()
    yield idp
    idp.close()
    oidc._discovered.clear()


FORM = re.compile(r'<form[^>]*action="([^"]*)"[^>]*>(.*?)</form>', re.S)
INPUT = re.compile(r"<input\b[^>]*>")
ATTR = re.compile(r'(\w+)="([^"]*)"')


def submit_forms(session: requests.Session, response: requests.Response, login: str, stop_at: str) -> requests.Response:
    """Act as the person at the provider's pages: fill the login form, confirm consent or logout, until the
    browser is back on `stop_at`."""
    for _ in range(6):
        if response.url.startswith(stop_at):
            return response
        found = FORM.search(response.text)
        assert found, (response.status_code, response.url, response.text[:500])
        action, inner = found.groups()
        attrs = [dict(ATTR.findall(tag)) for tag in INPUT.findall(inner)]
        fields = {a["name"]: html.unescape(a.get("value", "")) for a in attrs if "name" in a}
        if "login" in fields:
            fields.update(login=login, password="any-password")
        if "xsrf" in fields:  # the provider's end-session page: "Yes, sign me out" (a button outside the form)
            fields["logout"] = "yes"
        response = session.post(urljoin(response.url, html.unescape(action)), data=fields, timeout=10)
    raise AssertionError(f"never got back to {stop_at}: {response.url}")


def sign_in(live_server, login: str) -> requests.Session:
    session = requests.Session()
    response = session.get(f"{live_server.url}/oidc/authenticate/", timeout=10)
    submit_forms(session, response, login, live_server.url)
    return session


def signed_in_user(live_server, session: requests.Session) -> str | None:
    answer = session.get(f"{live_server.url}/api/v1/teams/", headers={"Accept": "application/json"}, timeout=10)
    if answer.status_code != 200:
        return None
    key = session.cookies.get("sessionid")
    return User.objects.get(pk=SessionStore(session_key=key)["_auth_user_id"]).username if key else None


@pytest.mark.django_db(transaction=True)
def test_sign_in_maps_groups_to_teams_and_roles_and_a_removed_group_removes_access(provider, live_server):
    provider.set_accounts({
        "alice": {"email": "alice@example.com", "groups": ["gpufinops-team-vision", "gpufinops-finance", "other"]},
        "bob": {"email": "bob@example.com", "groups": ["gpufinops-admin", "gpufinops-team-=bad", 7]},
    })
    alice = sign_in(live_server, "alice")
    assert signed_in_user(live_server, alice) == "alice"
    user = User.objects.get(username="alice")
    assert set(user.teams.values_list("name", flat=True)) == {"vision"}
    assert user.groups.filter(name=FINANCE_GROUP).exists() and not user.is_staff
    assert not user.has_usable_password()  # the provider is the only way in

    bob = sign_in(live_server, "bob")
    assert signed_in_user(live_server, bob) == "bob"
    bob_user = User.objects.get(username="bob")
    assert bob_user.is_staff and not bob_user.teams.exists()  # "=bad" is no team name; 7 is no group

    # The provider takes alice's groups away: her next sign-in takes the access away.
    provider.set_accounts({"alice": {"email": "alice@example.com", "groups": ["gpufinops-team-research"]}})
    alice = sign_in(live_server, "alice")
    user.refresh_from_db()
    assert set(user.teams.values_list("name", flat=True)) == {"research"}
    assert not user.groups.filter(name=FINANCE_GROUP).exists()


@pytest.mark.django_db(transaction=True)
def test_a_tampered_or_expired_id_token_is_refused(provider, live_server, settings):
    provider.set_accounts({"carol": {"email": "c@example.com", "groups": ["gpufinops-team-vision"]}})
    session = sign_in(live_server, "carol")
    stored = SessionStore(session_key=session.cookies.get("sessionid"))
    token = stored["oidc_id_token"]
    claims = jwt.decode(token, options={"verify_signature": False})
    backend = oidc.IdentityProviderBackend()
    assert backend.verify_token(token, nonce=claims.get("nonce"))["sub"] == "carol"  # the real one passes

    header, payload, signature = token.split(".")
    forged_claims = {**claims, "groups": ["gpufinops-admin"], "sub": "mallory"}
    forged = jwt.encode(forged_claims, "not-the-providers-key-" + "x" * 16, algorithm="HS256")
    tampered = ".".join([header, forged.split(".")[1], signature])  # the provider's signature over other claims
    for bad in (tampered, forged, token[:-4] + "AAAA"):
        with pytest.raises(SuspiciousOperation):
            backend.verify_token(bad, nonce=claims.get("nonce"))
    with pytest.raises(SuspiciousOperation):  # replayed into another sign-in: the nonce differs
        backend.verify_token(token, nonce="another-sign-in")
    with time_machine.travel(timedelta(hours=2)), pytest.raises(SuspiciousOperation):
        backend.verify_token(token, nonce=claims.get("nonce"))
    settings.OIDC_RP_CLIENT_ID = "another-client"
    with pytest.raises(SuspiciousOperation):  # a token issued to another application
        oidc.IdentityProviderBackend().verify_token(token, nonce=claims.get("nonce"))


@pytest.mark.django_db(transaction=True)
def test_logout_ends_the_session_here_and_at_the_provider(provider, live_server):
    provider.set_accounts({"dave": {"email": "d@example.com", "groups": ["gpufinops-team-vision"]}})
    session = sign_in(live_server, "dave")
    assert signed_in_user(live_server, session) == "dave"
    page = session.get(f"{live_server.url}/", timeout=10)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = session.post(f"{live_server.url}/oidc/logout/", data={"csrfmiddlewaretoken": csrf},
                            headers={"Referer": f"{live_server.url}/"}, timeout=10)
    assert response.url.startswith(provider.issuer)  # on to the provider's end-session page
    submit_forms(session, response, "dave", live_server.url)
    assert signed_in_user(live_server, session) is None
    # The provider's session is over too: signing in again asks for the login.
    again = session.get(f"{live_server.url}/oidc/authenticate/", timeout=10)
    assert 'name="login"' in again.text


@pytest.mark.django_db(transaction=True)
def test_local_accounts_can_be_turned_off(provider, live_server, settings):
    User.objects.create_user("breakglass", password="pw-breakglass-123456")
    session = requests.Session()
    page = session.get(f"{live_server.url}/accounts/login/", timeout=10)
    assert "company-signin" in page.text and 'name="password"' in page.text
    settings.GPUFINOPS_LOCAL_SIGNIN = False
    settings.AUTHENTICATION_BACKENDS = [b for b in BACKENDS if not b.endswith("ModelBackend")]
    page = session.get(f"{live_server.url}/accounts/login/", timeout=10)
    assert "company-signin" in page.text and 'name="password"' not in page.text
    csrf = session.cookies.get("csrftoken")
    for url in ("/accounts/login/", "/admin/login/"):
        session.post(f"{live_server.url}{url}", data={"username": "breakglass", "password": "pw-breakglass-123456",
                                                       "csrfmiddlewaretoken": csrf},
                     headers={"Referer": f"{live_server.url}{url}"}, timeout=10)
        assert signed_in_user(live_server, session) is None, url


@pytest.mark.django_db(transaction=True)
def test_the_whole_flow_in_a_browser(provider, live_server, browser):
    """Headless Chromium: the sign-in page's company button, the provider's login and consent pages, the
    dashboard as the provider's person with the team from their group, and signing out at both ends."""
    provider.set_accounts({"erin": {"email": "erin@example.com", "groups": ["gpufinops-team-vision"]}})
    browser.goto(f"{live_server.url}/accounts/login/")
    browser.wait_for("!!document.querySelector('#company-signin')")
    browser.eval("document.querySelector('#company-signin').click()")
    browser.wait_for(f"location.href.startsWith({provider.issuer!r}) && !!document.querySelector('input[name=login]')")
    browser.eval("document.querySelector('input[name=login]').value = 'erin';"
                 "document.querySelector('input[name=password]').value = 'any-password';"
                 "document.querySelector('input[name=login]').form.submit()")
    browser.wait_for("!!document.querySelector('button[type=submit]') && "
                     "!document.querySelector('input[name=login]') || location.port !== " + repr(provider.issuer[-5:]))
    if browser.eval(f"location.href.startsWith({provider.issuer!r})"):  # the consent page
        browser.eval("document.querySelector('form').submit()")
    browser.wait_for(f"location.href.startsWith({live_server.url!r}) && document.readyState === 'complete' && "
                     "!!document.querySelector('.nav-user')")
    assert browser.eval("document.querySelector('.nav-user').textContent.trim()") == "erin"
    assert set(User.objects.get(username="erin").teams.values_list("name", flat=True)) == {"vision"}

    browser.eval("document.querySelector('.nav-form').submit()")
    browser.wait_for(f"location.href.startsWith({provider.issuer!r}) && !!document.querySelector('form')")
    browser.eval("document.querySelector('button[name=logout]').click()")
    browser.wait_for(f"location.href.startsWith({live_server.url!r}) && document.readyState === 'complete'")
    assert not browser.eval("!!document.querySelector('.nav-user')")


@pytest.mark.django_db(transaction=True)
def test_a_callback_with_a_foreign_state_or_garbage_signs_nobody_in(provider, live_server):
    provider.set_accounts({"frank": {"email": "f@example.com", "groups": []}})
    session = requests.Session()
    start = session.get(f"{live_server.url}/oidc/authenticate/", allow_redirects=False, timeout=10)
    assert "code_challenge=" in start.headers["Location"] and "code_challenge_method=S256" in start.headers["Location"]
    assert "state=" in start.headers["Location"] and "nonce=" in start.headers["Location"]
    for query in ("code=stolen&state=not-the-one-we-sent", "code=&state=", "error=access_denied&state=x",
                  "code=%00&state=%ff", "state=" + "x" * 5000):
        answer = session.get(f"{live_server.url}/oidc/callback/?{query}", timeout=10)
        assert answer.status_code < 500, query
        assert signed_in_user(live_server, session) is None, query


def test_the_checks_say_when_company_sign_in_is_half_configured_or_nobody_can_sign_in(settings):
    from apps.accounts.checks import signin_configured

    settings.GPUFINOPS_OIDC_ISSUER, settings.OIDC_RP_CLIENT_ID = "https://idp.example", ""
    assert [m.id for m in signin_configured()] == ["gpufinops.E101"]
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    assert signin_configured() == []
    settings.GPUFINOPS_OIDC_ISSUER, settings.GPUFINOPS_LOCAL_SIGNIN = "", False
    assert [m.id for m in signin_configured()] == ["gpufinops.W101"]
