from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "apps.budgets"
    label = "budgets"
    verbose_name = "Budgets"
