"""App config for the infrastructure adapters; registers the configuration system checks."""
from django.apps import AppConfig


class InfraConfig(AppConfig):
    name = "infra"
    label = "infra"

    def ready(self):
        from . import checks  # noqa: F401  (registers system checks)
