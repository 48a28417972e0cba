from django.urls import path

from apps.billing.api import views

urlpatterns = [
    path("reconciliation/", views.ReconciliationApi.as_view(), name="reconciliation"),
    path("billed-costs/", views.BilledCostsApi.as_view(), name="billed-costs"),
]
