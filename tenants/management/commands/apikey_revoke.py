"""manage.py apikey_revoke PREFIX: revoke an API key by its public prefix."""
from django.core.management.base import BaseCommand, CommandError

from tenants.services import apikey_revoke


class Command(BaseCommand):
    help = "Revoke an API key (the part before the dot)."

    def add_arguments(self, parser):
        parser.add_argument("prefix")

    def handle(self, prefix, **options):
        prefix = prefix.partition(".")[0]
        if not apikey_revoke(prefix=prefix):
            raise CommandError(f"No active key with prefix '{prefix}'.")
        self.stdout.write(f"revoked {prefix}")
