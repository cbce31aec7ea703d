"""Import jobs move here from chat_sessions, beside orchestration/imports.py that writes them, with their rows: state
moves, then the table is renamed."""
import django.db.models.deletion
import django.utils.timezone
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('orchestration', '0001_context_receipts'),
        ('chat_sessions', '0004_import_job_lifetimes'),
        ('tenants', '0006_tenant_review_supersede_below'),
    ]

    operations = [
        # The tables exist already (created by chat_sessions): this migration takes over their state, then
        # renames each to this app's name. Rows stay where they are; only the name changes.
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='ImportJob',
                fields=[
                    ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                    ('format', models.CharField(max_length=16)),
                    ('options', models.JSONField(blank=True, default=dict)),
                    ('source', models.CharField(choices=[('api', 'API'), ('command', 'Management command')], default='api', max_length=10)),
                    ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed')], db_index=True, default='queued', max_length=10)),
                    ('payload', models.BinaryField(blank=True, null=True)),
                    ('file_name', models.CharField(blank=True, default='', max_length=1000)),
                    ('sessions_total', models.PositiveIntegerField(default=0)),
                    ('messages_total', models.PositiveIntegerField(default=0)),
                    ('position', models.PositiveIntegerField(default=0)),
                    ('sessions_created', models.PositiveIntegerField(default=0)),
                    ('messages_created', models.PositiveIntegerField(default=0)),
                    ('messages_skipped', models.PositiveIntegerField(default=0)),
                    ('error', models.TextField(blank=True, default='')),
                    ('lifetimes', models.JSONField(blank=True, default=dict)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('started_at', models.DateTimeField(blank=True, null=True)),
                    ('finished_at', models.DateTimeField(blank=True, null=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='import_jobs', to='tenants.tenant')),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='import_jobs', to='tenants.enduser')),
                ],
                options={
                    'db_table': 'chat_sessions_importjob',
                    'ordering': ['-created_at', 'id'],
                },
            ),
        ]),
        migrations.AlterModelTable(name='importjob', table=None),
    ]
