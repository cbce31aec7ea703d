"""App config for the staff admin's cross-app pages (backoffice/admin/, found by the admin's autodiscovery)."""
from django.apps import AppConfig


class BackofficeConfig(AppConfig):
    name = "backoffice"
    verbose_name = "Back office"
