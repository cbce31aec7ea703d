"""manage.py demo_tenant: ensure the 'demo' tenant exists and print a fresh API key for it (nothing else)."""
from django.core.management.base import BaseCommand

from tenants.models import Tenant
from tenants.services import apikey_create, tenant_create


class Command(BaseCommand):
    help = "Create the demo tenant if missing and print a new API key for it."

    def handle(self, **options):
        tenant = Tenant.objects.filter(slug="demo").first() or tenant_create(name="Demo", slug="demo")
        _, key = apikey_create(tenant=tenant, name="demo")
        self.stdout.write(key)
