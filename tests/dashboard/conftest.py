"""The dashboard tests' world: the demo collected once (one simulated day through the production collector), the
people who look at it, and the site served on a loopback port for headless Chromium.

The demo takes half a minute, so it is seeded once for the tests of this package that ask for it (`demo_site`,
package scope) and committed, not rolled back: tests that read it (`demo_db`) get database access without a
transaction of their own, so the live server's thread sees what they see. They run together, right after the
tests that run in a transaction of their own and before the transactional ones (which flush the database), so
the seed is made once per session; the package's teardown flushes it for the rest of the suite. Tests that write
their own rows use the usual `db` fixture and never see the demo.
"""

from __future__ import annotations

import types
from datetime import timedelta

import pytest

PASSWORD = "pw-dashboard-123456"
# username -> (teams, finance group, staff)
PEOPLE = {
    "lead": (["research"], False, False),
    "outsider": (["vision"], False, False),  # no LocalQueue
    "nobody": ([], False, False),
    "fin": ([], True, False),
    "ops": ([], False, True),
}


def _runs_in_a_transaction_of_its_own(item: pytest.Item) -> bool:
    """pytest-django's first group: `db` tests, not transactional ones."""
    fixtures = getattr(item, "fixturenames", ())
    marker = item.get_closest_marker("django_db")
    transactional = "transactional_db" in fixtures or "live_server" in fixtures or bool(
        marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")))
    return (bool(marker) or "db" in fixtures) and not transactional


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep the demo's tests together (one seed), between pytest-django's `db` tests and its transactional ones."""
    demo = [i for i in items if "demo_site" in getattr(i, "fixturenames", ())]
    if not demo:
        return
    rest = [i for i in items if "demo_site" not in getattr(i, "fixturenames", ())]
    at = next((n for n, i in enumerate(rest) if not _runs_in_a_transaction_of_its_own(i)), len(rest))
    items[:] = rest[:at] + demo + rest[at:]


@pytest.fixture(scope="package")
def demo_site(django_db_setup, django_db_blocker):
    """The demo (1 day), its people, and the site served by a live-server thread: `url`, `users`, `end` (the hour
    after the newest bucket: the end the demo's scenario was built with)."""
    from django.contrib.auth.models import Group, User
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.management import call_command
    from django.test.testcases import LiveServerThread

    from apps.accounts.selectors import FINANCE_GROUP
    from apps.accounts.services import add_team_member
    from apps.usage.models import Bucket

    own_db = None
    with django_db_blocker.unblock():
        from django.db import connection
        from django.test.utils import setup_databases

        # pytest-django makes the test database only when a collected test asks for `db` (or a marker): a run of
        # nothing but these tests must make it here.
        if "test" not in str(connection.settings_dict["NAME"]):
            own_db = setup_databases(verbosity=0, interactive=False, aliases={"default"})
        call_command("demo", "--days", "1", "--no-with-dra")  # the pinned cases
        users = {}
        for name, (teams, finance, staff) in PEOPLE.items():
            user = User.objects.create_user(name, password=PASSWORD, is_staff=staff)
            for team in teams:
                add_team_member(team, name, create=True)
            if finance:
                user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
            users[name] = user
        newest = Bucket.objects.order_by("-hour").values_list("hour", flat=True).first()
    # staticfiles' handler finds files as runserver does (django.test's serves STATIC_ROOT, empty before
    # collectstatic: no stylesheet, no Plotly, no Swagger UI on a fresh clone).
    server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    if server.error:
        raise server.error
    try:
        yield types.SimpleNamespace(url=f"http://127.0.0.1:{server.port}", users=users,
                                    end=newest + timedelta(hours=1), newest=newest)
    finally:
        server.terminate()
        with django_db_blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)
            if own_db is not None:
                from django.test.utils import teardown_databases

                teardown_databases(own_db, verbosity=0)


@pytest.fixture
def demo_db(demo_site, django_db_blocker):
    """Database access to the committed demo for one test (no transaction: write nothing you do not remove)."""
    with django_db_blocker.unblock():
        yield demo_site


@pytest.fixture
def as_user(demo_db):
    """`as_user(name)`: a Django test client signed in as one of PEOPLE."""
    from django.test import Client

    def make(name: str) -> Client:
        client = Client()
        # As stored now: a browser sign-in may have re-hashed the password (tests' fast hasher), and a session
        # made from the seed's stale copy would be refused.
        user = demo_db.users[name]
        user.refresh_from_db()
        client.force_login(user)
        return client

    return make


def sign_in(browser, site, username: str, password: str = PASSWORD) -> None:
    """Through the real sign-in form (with its CSRF token), as a person would."""
    browser.goto(site.url + "/accounts/login/")
    browser.eval(f"document.querySelector('#id_username').value = {username!r}")
    browser.eval(f"document.querySelector('#id_password').value = {password!r}")
    browser.eval("document.querySelector('form.form button[type=submit]').click()")
    browser.wait_for("location.pathname !== '/accounts/login/' || !!document.querySelector('p.error')")
    browser.wait_for("document.readyState === 'complete'")
