"""Summary anchors, bridge summaries and session links move here from chat_sessions, beside the code that writes
them, with their rows: state moves, then each table is renamed."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('chat_sessions', '0004_import_job_lifetimes'),
        ('tenants', '0006_tenant_review_supersede_below'),
    ]

    operations = [
        # The tables exist already (created by chat_sessions): this migration takes over their state, then
        # renames each to this app's name. Rows stay where they are; only the name changes.
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='BridgeSummary',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('text', models.TextField()),
                    ('goal', models.TextField(blank=True, default='')),
                    ('details', models.JSONField(blank=True, default=dict)),
                    ('goal_embedding', models.JSONField(blank=True, null=True)),
                    ('method', models.CharField(default='extractive', max_length=20)),
                    ('token_count', models.PositiveIntegerField(default=0)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('session', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='bridge', to='chat_sessions.session')),
                    ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='tenants.tenant')),
                ],
                options={'db_table': 'chat_sessions_bridgesummary'},
            ),
            migrations.CreateModel(
                name='SessionLink',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('kind', models.CharField(choices=[('same_user', 'Same user'), ('similar_goal', 'Similar goal'), ('referenced_context', 'Referenced context')], max_length=24)),
                    ('score', models.FloatField(default=1.0)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('from_session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='links_out', to='chat_sessions.session')),
                    ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='tenants.tenant')),
                    ('to_session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='links_in', to='chat_sessions.session')),
                ],
                options={
                    'db_table': 'chat_sessions_sessionlink',
                    'constraints': [models.UniqueConstraint(fields=('from_session', 'to_session', 'kind'), name='link_unique')],
                },
            ),
            migrations.CreateModel(
                name='SummaryAnchor',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('first_seq', models.PositiveIntegerField()),
                    ('last_seq', models.PositiveIntegerField()),
                    ('first_turn', models.PositiveIntegerField(default=0)),
                    ('last_turn', models.PositiveIntegerField(default=0)),
                    ('text', models.TextField()),
                    ('token_count', models.PositiveIntegerField(default=0)),
                    ('method', models.CharField(default='extractive', max_length=20)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='anchors', to='chat_sessions.session')),
                    ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='tenants.tenant')),
                ],
                options={
                    'db_table': 'chat_sessions_summaryanchor',
                    'ordering': ['session', 'first_seq'],
                    'constraints': [models.UniqueConstraint(fields=('session', 'first_seq'), name='anchor_unique_start')],
                },
            ),
        ]),
        migrations.AlterModelTable(name='bridgesummary', table=None),
        migrations.AlterModelTable(name='sessionlink', table=None),
        migrations.AlterModelTable(name='summaryanchor', table=None),
    ]
