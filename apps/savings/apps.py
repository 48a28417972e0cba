from django.apps import AppConfig


class SavingsConfig(AppConfig):
    name = "apps.savings"
    label = "savings"
    verbose_name = "Savings"
