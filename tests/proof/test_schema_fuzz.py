"""Schema fuzzing: schemathesis drives every operation of /api/schema/ through the WSGI app, valid and invalid input.

Figure printed: requests sent, server errors, schema violations (undocumented status, content type, body or
headers that do not match the schema, invalid input accepted). Both must be 0.
"""
from __future__ import annotations

import os
import re
import time
from collections import Counter, defaultdict

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Examples per operation and mode; 2 modes x ~15-40 operations keeps the run well under two minutes.
EXAMPLES = int(os.environ.get("SCHEMA_FUZZ_EXAMPLES", "20"))
# Reproducible by default; SCHEMA_FUZZ_RANDOM=1 explores new inputs each run.
RANDOM = os.environ.get("SCHEMA_FUZZ_RANDOM") == "1"

UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx, value):
    """The portable memory import's body: JSON Lines (one document per line; a string is sent as it is)."""
    import json

    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogatepass")
    return "\n".join(json.dumps(v) for v in (value if isinstance(value, list) else [value])).encode()


CONFORMANCE = [status_code_conformance, content_type_conformance, response_schema_conformance,
               response_headers_conformance, negative_data_rejection]


@pytest.fixture
def world(make_tenant):
    """One tenant with real objects, so fuzzed ids sometimes name something that exists."""
    from orchestration.messages import messages_append
    from orchestration.models import ImportJob
    from orchestration.sessions import session_open
    from sessions.services import NewMessage
    from tenants.services import end_user_create

    tenant = make_tenant("Fuzz", requests_per_minute=1_000_000, tokens_per_minute=10_000_000)
    ids = defaultdict(list)
    for n in range(3):
        user = end_user_create(tenant=tenant, external_id=f"fuzz-user-{n}")
        session, _ = session_open(tenant=tenant, user=user)
        rows = messages_append(tenant=tenant, session_id=session.id, items=[
            NewMessage(role="user", content=f"I live in Lisbon and my dog is called Rex {n}."),
            NewMessage(role="assistant", content="Noted."),
        ])
        ids["user_id"].append(str(user.id))
        ids["session_id"].append(str(session.id))
        ids["message_id"].extend(str(m.id) for m in rows)
        job = ImportJob.objects.create(tenant=tenant, user=user, format="openai", status="done")
        ids["job_id"].append(str(job.id))
    from webhooks.services import webhook_endpoint_create

    for n in range(2):
        endpoint, _ = webhook_endpoint_create(tenant=tenant, url=f"https://hooks.example.com/fuzz-{n}")
        ids["webhook_id"].append(str(endpoint.pk))
    try:
        from memory.models import MemoryRecord
        ids["memory_id"].extend(
            str(i) for i in MemoryRecord.objects.unscoped().filter(tenant=tenant).values_list("id", flat=True))
    except Exception:  # noqa: BLE001 - memories are optional here; random ids still exercise the 404 paths
        pass
    return tenant, ids


def _substitute_real_ids(case, ids, pick: int):
    """Half the time, replace well-formed fuzzed path ids with ids of objects this tenant owns (a malformed id
    is what a negative case is testing, so it stays)."""
    if pick % 2 or not case.path_parameters:
        return
    for name, value in list(case.path_parameters.items()):
        pool = ids.get(name)
        if pool and isinstance(value, str) and UUID_RE.match(value):
            case.path_parameters[name] = pool[pick // 2 % len(pool)]


def _is_server_error(response) -> bool:
    """A 5xx is a server error unless it is the documented 503: a dependency down (or no LLM configured), said
    in the error envelope with a code."""
    if response.status_code < 500:
        return False
    if response.status_code == 503:
        try:
            return not response.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return True
    return True


def test_schema_fuzz_has_no_server_errors_or_violations(world):
    from config.wsgi import application

    tenant, ids = world
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
    schema.config.generation.update(with_security_parameters=False)
    auth = {"Authorization": f"Bearer {tenant.plain_key}"}

    sent = Counter()
    seconds = Counter()
    statuses = Counter()
    server_errors: list[str] = []
    violations: list[str] = []
    no_negative: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert operations, "the schema lists no operations"

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)

            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not RANDOM,
                      suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
            @given(case=strategy, pick=st.integers(0, 5))
            def run(case, pick):
                _substitute_real_ids(case, ids, pick)
                started = time.perf_counter()
                response = case.call(headers=auth)
                seconds[operation.label] += time.perf_counter() - started
                sent[operation.label] += 1
                statuses[response.status_code] += 1
                where = f"{mode.value} {operation.label} -> {response.status_code}"
                if _is_server_error(response):
                    server_errors.append(f"{where}\n  {case.as_curl_command(auth)}\n  {response.content[:300]!r}")
                    return
                try:
                    case.validate_response(response, checks=CONFORMANCE, headers=auth)
                except FailureGroup as exc:
                    titles = "; ".join(sorted({f.title for f in exc.exceptions}))
                    violations.append(f"{where}: {titles}\n  {case.as_curl_command(auth)}\n  "
                                      f"{response.content[:300]!r}")

            try:
                run()
            except Unsatisfiable:
                # Nothing in this operation can be made invalid (no parameters or body): positive mode covers it.
                assert mode is GenerationMode.NEGATIVE, operation.label
                no_negative.append(operation.label)

    total = sum(sent.values())
    print(f"\nschema fuzz figure: {len(operations)} operations, {total} requests "
          f"(statuses {dict(sorted(statuses.items()))}), server errors {len(server_errors)}, "
          f"schema violations {len(violations)}; nothing to negate in: {', '.join(no_negative) or '-'}")
    for label, spent in seconds.most_common(5):
        print(f"  slowest: {label}: {sent[label]} requests, {spent:.1f} s")
    shown = set()
    for line in server_errors + violations:  # one example of each kind of failure
        kind = line.split("\n")[0]
        if kind not in shown:
            shown.add(kind)
            print(" ", line[:700])
    assert all(sent[op.label] > 0 for op in operations)
    assert not server_errors, f"{len(server_errors)} server errors, first: {server_errors[0]}"
    assert not violations, f"{len(violations)} schema violations, first: {violations[0]}"
