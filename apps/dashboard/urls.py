from django.contrib.auth import views as auth_views
from django.urls import path

from apps.accounts.forms import SignInForm
from apps.dashboard import views
from apps.reports import views as report_views

app_name = "dashboard"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("workloads/", views.workloads, name="workloads"),
    # A workload is `Kind/name` in its cluster and namespace: /workloads/prod/ml-training/Job/train-llm/
    path("workloads/<str:cluster>/<str:namespace>/<path:workload>/", views.workload, name="workload"),
    path("queues/", views.queues, name="queues"),
    path("fleet/", views.fleet, name="fleet"),
    path("teams/", views.teams, name="teams"),
    path("capacity/", views.capacity, name="capacity"),
    path("data-status/", views.data_status_page, name="data-status"),
    path("clusters/<str:cluster>/preflight/", views.cluster_preflight, name="cluster-preflight"),
    path("glossary/", views.glossary, name="glossary"),
    path("reports/", views.reports_page, name="reports"),
    path("reports/unsubscribe/<str:token>/", report_views.unsubscribe, name="report-unsubscribe"),
    path("healthz", views.healthz, name="healthz"),
    # Session sign-in for the dashboards and the browsable API (LOGIN_URL = /accounts/login/).
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=SignInForm), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
