from django.urls import path

from apps.budgets.api import views

urlpatterns = [
    path("budgets/", views.BudgetListApi.as_view(), name="budgets"),
]
