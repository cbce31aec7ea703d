"""manage.py apikey_create SLUG: issue another API key for a tenant."""
from django.core.management.base import BaseCommand, CommandError

from tenants.models import Tenant
from tenants.services import apikey_create


class Command(BaseCommand):
    help = "Create an API key for a tenant and print it once."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", default="default")

    def handle(self, slug, name, **options):
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"No tenant '{slug}'.")
        row, key = apikey_create(tenant=tenant, name=name)
        self.stdout.write(f"api key {row.prefix} (shown once): {key}")
