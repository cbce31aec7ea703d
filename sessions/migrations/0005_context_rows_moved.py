"""Summary anchors, bridge summaries and session links now belong to context, import jobs to orchestration
(context/migrations/0001_initial.py, orchestration/migrations/0002_import_job_moved.py take over their tables and rows).
This app lets go of their state only, and moves their content types, so staff permissions and admin history on them
carry over."""
from django.db import migrations

MOVED = {"summaryanchor": "context", "bridgesummary": "context", "sessionlink": "context", "importjob": "orchestration"}


def content_types_move(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model, app_label in MOVED.items():
        if not ContentType.objects.filter(app_label=app_label, model=model).exists():
            ContentType.objects.filter(app_label="chat_sessions", model=model).update(app_label=app_label)


def content_types_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model, app_label in MOVED.items():
        if not ContentType.objects.filter(app_label="chat_sessions", model=model).exists():
            ContentType.objects.filter(app_label=app_label, model=model).update(app_label="chat_sessions")


class Migration(migrations.Migration):

    dependencies = [
        ("chat_sessions", "0004_import_job_lifetimes"),
        ("context", "0001_initial"),
        ("orchestration", "0002_import_job_moved"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveField(
                model_name='importjob',
                name='tenant',
            ),
            migrations.RemoveField(
                model_name='importjob',
                name='user',
            ),
            migrations.RemoveField(
                model_name='sessionlink',
                name='from_session',
            ),
            migrations.RemoveField(
                model_name='sessionlink',
                name='tenant',
            ),
            migrations.RemoveField(
                model_name='sessionlink',
                name='to_session',
            ),
            migrations.RemoveField(
                model_name='summaryanchor',
                name='session',
            ),
            migrations.RemoveField(
                model_name='summaryanchor',
                name='tenant',
            ),
            migrations.DeleteModel(
                name='BridgeSummary',
            ),
            migrations.DeleteModel(
                name='ImportJob',
            ),
            migrations.DeleteModel(
                name='SessionLink',
            ),
            migrations.DeleteModel(
                name='SummaryAnchor',
            ),
        ]),
        migrations.RunPython(content_types_move, content_types_back),
    ]
