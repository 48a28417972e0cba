from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("gpufinops.api_urls")),
    path("oidc/", include("apps.accounts.urls")),  # company sign-in (apps/accounts/oidc.py)
    path("", include("apps.monitoring.urls")),  # /metrics (Prometheus, protected) and /livez (liveness)
    path("", include("apps.findings.urls")),  # /findings/
    path("", include("apps.billing.urls")),  # /reconciliation/
    path("", include("apps.budgets.urls")),  # /budgets/
    path("", include("apps.savings.urls")),  # /savings/
    path("", include("apps.dashboard.urls")),
]
