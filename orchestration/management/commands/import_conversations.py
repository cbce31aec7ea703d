"""manage.py import_conversations --tenant SLUG --user USER --format locomo|openai FILE: import an export of any
size for one end user, streamed from the file, with a progress bar.

The job it records is resumable: a run stopped anywhere (Ctrl-C, a crash) is continued with --resume JOB_ID, and
running the same file again writes nothing twice. Bridges and extraction of the imported sessions are queued on the
`bulk` queue for the workers, paced behind live turns; this command never touches the vector store, so it may run
beside an embedded-mode server.
"""
from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from infra.errors import AppError
from orchestration.imports import (
    access_import_job,
    import_job_advance,
    import_job_create,
    import_job_failed,
    import_job_resume,
    imports_backlog_pending,
)
from orchestration.management.refs import tenant_and_user_by_ref
from orchestration.models import ImportJob
from sessions.import_formats import FORMATS


class Command(BaseCommand):
    help = "Import a conversation export (LoCoMo-style or OpenAI-style JSON) for one end user."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--tenant", required=True, help="Tenant slug or id.")
        parser.add_argument("--user", required=True, help="The end user's id or external id.")
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("--speaker", default="", help="LoCoMo: whose turns are the user's (speaker_a, "
                                                          "speaker_b or a name; default speaker_a).")
        parser.add_argument("--resume", metavar="JOB_ID", help="Continue this import job from its cursor.")
        parser.add_argument("--accept-expiry", action="store_true",
                            help="Import even if the tenant's memory TTLs would expire memories of it at once.")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, file, tenant, user, format, speaker, resume, no_progress, accept_expiry, **options):
        tenant_row, user_row = tenant_and_user_by_ref(tenant=tenant, user=user)
        path = os.path.abspath(file)
        try:
            if resume:
                job = access_import_job(tenant=tenant_row, user=user_row, job_id=resume)
                if job.source != ImportJob.Source.COMMAND:
                    raise CommandError(f"Job {job.pk} came through the API; its worker task resumes it.")
                if job.file_name != path:
                    raise CommandError(f"Job {job.pk} imports {job.file_name}, not {path}.")
                job = import_job_resume(tenant_id=tenant_row.pk, job_id=job.pk)
            else:
                self.stdout.write(f"checking {path} ...")
                job = import_job_create(tenant=tenant_row, user=user_row, fmt=format, file_name=path,
                                        speaker=speaker, source=ImportJob.Source.COMMAND,
                                        accept_expiry=accept_expiry)
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from None
        except AppError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        self.stdout.write(f"import job {job.pk}: {job.messages_total} messages in {job.sessions_total} sessions")
        bar = tqdm(total=job.messages_total, initial=job.position, unit="msg", disable=no_progress,
                   file=self.stderr._out)
        try:
            run = import_job_advance(tenant_id=tenant_row.pk, job_id=job.pk,
                                     on_progress=lambda position: bar.update(position - bar.n))
        except BaseException as exc:
            import_job_failed(tenant_id=tenant_row.pk, job_id=job.pk, error=f"{exc.__class__.__name__}: {exc}")
            raise CommandError(f"stopped ({exc.__class__.__name__}: {exc}); what was written is kept. Continue with "
                               f"--resume {job.pk}") from None
        finally:
            bar.close()
        job = run.job
        backlog = imports_backlog_pending(tenant_id=tenant_row.pk, user_id=user_row.pk)
        self.stdout.write(f"{job.status}: {job.messages_created} messages and {job.sessions_created} sessions "
                          f"written, {job.messages_skipped} already stored; queued for the workers: "
                          f"{backlog['bridges']} bridges, {backlog['extractions']} extractions")
