from django.apps import AppConfig


class CapacityConfig(AppConfig):
    name = "apps.capacity"
    label = "capacity"
