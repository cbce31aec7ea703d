"""manage.py import_conversations: a file streamed into the user's history with a progress bar, resumable, and
running it again writes nothing twice."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from orchestration.models import ImportJob
from sessions.models import Message
from tests.orchestration.exports import LOCOMO_SAMPLE, openai_conversation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def kicks(monkeypatch):
    from orchestration import imports

    recorded = []
    monkeypatch.setattr(imports, "imports_backlog_kick", lambda **kw: recorded.append(kw))
    return recorded


def run(*args, **kwargs) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_conversations", *args, stdout=out, stderr=err, **kwargs)
    return out.getvalue(), err.getvalue()


def test_the_command_imports_a_file_with_a_progress_bar_and_a_rerun_writes_nothing(alice, alice_user, tmp_path,
                                                                                   kicks):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([LOCOMO_SAMPLE]))
    out, err = run(str(path), tenant=alice.slug, user=alice_user.external_id, format="locomo")
    assert "done: 5 messages and 2 sessions written, 0 already stored" in out
    assert "5/5" in err  # tqdm's bar
    assert kicks == [{"tenant_id": alice.pk, "user_id": alice_user.pk}]  # the workers get the backlog
    out, _ = run(str(path), tenant=str(alice.pk), user=str(alice_user.pk), format="locomo", no_progress=True)
    assert "done: 0 messages and 0 sessions written, 5 already stored" in out
    assert Message.objects.for_tenant(alice).count() == 5


def test_an_interrupted_command_resumes_from_its_job(alice, alice_user, tmp_path, monkeypatch, settings):
    from orchestration import imports

    settings.CONTINUUM_MAX_BATCH = 4
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([openai_conversation("a", 10)]))
    real, calls = imports._part_write, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(imports, "_part_write", interrupted)
    with pytest.raises(CommandError) as stopped:
        run(str(path), tenant=alice.slug, user=alice_user.external_id, format="openai", no_progress=True)
    job = ImportJob.objects.for_tenant(alice).get()
    assert f"--resume {job.pk}" in str(stopped.value)
    assert (job.status, job.position, job.source) == ("failed", 4, "command")
    monkeypatch.setattr(imports, "_part_write", real)
    other = tmp_path / "other.json"
    other.write_text("[]")
    with pytest.raises(CommandError, match="not .*other.json"):
        run(str(other), tenant=alice.slug, user=alice_user.external_id, format="openai", resume=str(job.pk))
    out, _ = run(str(path), tenant=alice.slug, user=alice_user.external_id, format="openai", resume=str(job.pk),
                 no_progress=True)
    job.refresh_from_db()
    assert (job.status, job.position, job.messages_created) == ("done", 10, 10)
    assert Message.objects.for_tenant(alice).count() == 10


@pytest.mark.parametrize("content, words", [
    ("{not json", "malformed_json"),
    (json.dumps([[{"role": "alien", "content": "hi"}]]), "invalid_export"),
])
def test_a_bad_file_is_refused_before_anything_is_stored(alice, alice_user, tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CommandError, match=words):
        run(str(path), tenant=alice.slug, user=alice_user.external_id, format="openai")
    assert not ImportJob.objects.for_tenant(alice).exists()


def test_unknown_tenant_user_or_file_are_refused(alice, alice_user, bob, tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[]")
    with pytest.raises(CommandError, match="No tenant"):
        run(str(path), tenant="nobody", user=alice_user.external_id, format="openai")
    with pytest.raises(CommandError, match="has no end user"):
        run(str(path), tenant=bob.slug, user=alice_user.external_id, format="openai")  # Alice's user, Bob's tenant
    with pytest.raises(CommandError, match="Cannot read"):
        run(str(tmp_path / "missing.json"), tenant=alice.slug, user=alice_user.external_id, format="openai")
