"""manage.py tenant_create NAME: create a tenant and print its first API key once."""
from django.core.management.base import BaseCommand, CommandError

from infra.errors import AppError
from tenants.services import apikey_create, tenant_create


class Command(BaseCommand):
    help = "Create a tenant and print a new API key (shown once, stored hashed)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--slug", default=None)
        parser.add_argument("--key-name", default="default")

    def handle(self, name, slug, key_name, **options):
        try:
            tenant = tenant_create(name=name, slug=slug)
        except AppError as exc:
            raise CommandError(exc.message)
        _, key = apikey_create(tenant=tenant, name=key_name)
        self.stdout.write(f"tenant {tenant.slug} ({tenant.id})")
        self.stdout.write(f"api key (shown once): {key}")
