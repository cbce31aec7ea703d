"""The migrations that move summary anchors, bridges and session links to context and import jobs to orchestration
keep every row: rows written under the old app's tables are read through the new models after migrating forward, and
a migration back to before the move finds them under the old tables again."""
from __future__ import annotations

import uuid

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from context.models import BridgeSummary, SessionLink, SummaryAnchor
from orchestration.models import ImportJob

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("chat_sessions", "0004_import_job_lifetimes"), ("context", None), ("orchestration", "0001_context_receipts")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def _leaves():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _old_rows(apps, tenant_id, user_id):
    """Rows as the old app wrote them: one of each moved model, through the pre-move state."""
    Session = apps.get_model("chat_sessions", "Session")
    first = Session.objects.create(tenant_id=tenant_id, user_id=user_id)
    second = Session.objects.create(tenant_id=tenant_id, user_id=user_id)
    apps.get_model("chat_sessions", "SummaryAnchor").objects.create(
        tenant_id=tenant_id, session=first, first_seq=1, last_seq=4, text="turns 1-2: the schema")
    apps.get_model("chat_sessions", "BridgeSummary").objects.create(tenant_id=tenant_id, session=first,
                                                                     text="Picked PostgreSQL.", goal="a schema")
    apps.get_model("chat_sessions", "SessionLink").objects.create(tenant_id=tenant_id, from_session=second,
                                                                   to_session=first, kind="same_user")
    job = apps.get_model("chat_sessions", "ImportJob").objects.create(id=uuid.uuid4(), tenant_id=tenant_id,
                                                                       user_id=user_id, format="openai", position=7)
    return first, second, job


def test_moved_rows_survive_forward_and_back(alice, alice_user):
    ContentType.objects.get_for_model(ImportJob)  # as a live database has it: a content type per model
    leaves = _leaves()
    try:
        old = _migrate(BEFORE)
        assert ContentType.objects.filter(app_label="chat_sessions", model="importjob").exists()
        first, second, job = _old_rows(old, alice.pk, alice_user.pk)

        _migrate(leaves)
        assert SummaryAnchor.objects.for_tenant(alice).get(session_id=first.pk).text == "turns 1-2: the schema"
        assert BridgeSummary.objects.for_tenant(alice).get(session_id=first.pk).goal == "a schema"
        assert SessionLink.objects.for_tenant(alice).filter(from_session_id=second.pk, to_session_id=first.pk).exists()
        assert ImportJob.objects.for_tenant(alice).get(pk=job.pk).position == 7
        assert {t for t in connection.introspection.table_names() if t.startswith("chat_sessions_")} == {
            "chat_sessions_session", "chat_sessions_message"}
        # Staff permissions hang on the content type, which moved with the model rather than being made anew.
        assert not ContentType.objects.filter(app_label="chat_sessions", model="importjob").exists()
        assert ContentType.objects.filter(app_label="orchestration", model="importjob").count() == 1

        back = _migrate(BEFORE)
        assert back.get_model("chat_sessions", "ImportJob").objects.get(pk=job.pk).position == 7
        assert back.get_model("chat_sessions", "BridgeSummary").objects.filter(session_id=first.pk).count() == 1
    finally:
        _migrate(leaves)
