"""/api/v1/: each domain app owns its routes in apps/<app>/api/urls.py; the OpenAPI document and its
renderings are the project's (like every /api/v1/ route, they need a login). Route names are namespaced
by app: `reverse("usage-api:usage")`."""

from django.contrib.auth.views import redirect_to_login
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.permissions import IsAuthenticated

from apps.common.api import NoSuchEndpoint


def sign_in_first(view):
    """The API's HTML renderings send a person who is not signed in to the sign-in page (and back), instead of a
    bare 401; a script sending a token gets the view (and its 401 when the token is bad)."""

    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated and "HTTP_AUTHORIZATION" not in request.META:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapped

urlpatterns = [
    path("", include(("apps.usage.api.urls", "usage-api"))),
    path("", include(("apps.capacity.api.urls", "capacity-api"))),
    path("", include(("apps.queues.api.urls", "queues-api"))),
    path("", include(("apps.reports.api.urls", "reports-api"))),
    path("", include(("apps.findings.api.urls", "findings-api"))),
    path("", include(("apps.billing.api.urls", "billing-api"))),
    path("", include(("apps.budgets.api.urls", "budgets-api"))),
    path("", include(("apps.savings.api.urls", "savings-api"))),
    path("schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="schema"),
    path(
        "docs/",
        # The split view serves its init script as a file: the Content-Security-Policy forbids inline scripts.
        sign_in_first(SpectacularSwaggerSplitView.as_view(url_name="schema", permission_classes=[IsAuthenticated])),
        name="api-docs",
    ),
    path(
        "redoc/",
        sign_in_first(SpectacularRedocView.as_view(url_name="schema", permission_classes=[IsAuthenticated])),
        name="api-redoc",
    ),
    # Last: any other path (ending in a slash; without one APPEND_SLASH redirects first) is a JSON 404.
    re_path(r"^(?:[\s\S]*/)?\Z", NoSuchEndpoint.as_view()),
]
