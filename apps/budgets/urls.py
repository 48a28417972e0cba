from django.urls import path

from apps.budgets import views

app_name = "budgets"
urlpatterns = [
    path("budgets/", views.budgets_page, name="budgets"),
]
