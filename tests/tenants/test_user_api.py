"""End-user endpoints: happy paths, validation, auth and ownership."""
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_create_get_list_delete_user(alice_client):
    r = alice_client.post("/api/v1/users", {"external_id": "u-1", "display_name": "Ada"}, format="json")
    assert r.status_code == 201, r.content
    uid = r.json()["id"]
    assert alice_client.get(f"/api/v1/users/{uid}").json()["external_id"] == "u-1"
    listed = alice_client.get("/api/v1/users").json()
    assert [u["id"] for u in listed["results"]] == [uid]
    assert alice_client.delete(f"/api/v1/users/{uid}").status_code == 204
    assert alice_client.get(f"/api/v1/users/{uid}").status_code == 404


def test_duplicate_external_id_is_409(alice_client):
    alice_client.post("/api/v1/users", {"external_id": "dup"}, format="json")
    r = alice_client.post("/api/v1/users", {"external_id": "dup"}, format="json")
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "user_exists"


@pytest.mark.parametrize("body", [{}, {"external_id": ""}, {"external_id": 5 * "x" * 100}, {"external_id": ["a"]},
                                  {"external_id": "ok", "metadata": "notadict"}])
def test_invalid_user_body_is_400(alice_client, body):
    r = alice_client.post("/api/v1/users", body, format="json")
    assert r.status_code == 400
    assert set(r.json()["error"]) == {"code", "message", "details"}


def test_malformed_json_is_400(alice_client):
    r = alice_client.generic("POST", "/api/v1/users", "{not json", content_type="application/json")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "malformed_body"


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer nope.nope", "Basic abc", "Token x"])
def test_missing_or_invalid_key_is_401(db, header):
    from rest_framework.test import APIClient

    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    r = client.get("/api/v1/users")
    assert r.status_code == 401
    assert "error" in r.json()


def test_revoked_key_is_401(alice, alice_client):
    from tenants.services import apikey_revoke

    assert alice_client.get("/api/v1/users").status_code == 200
    apikey_revoke(prefix=alice.plain_key.partition(".")[0])
    assert alice_client.get("/api/v1/users").status_code == 401


def test_outsider_gets_404_and_empty_list(alice_user, bob_client):
    assert bob_client.get(f"/api/v1/users/{alice_user.id}").status_code == 404
    assert bob_client.delete(f"/api/v1/users/{alice_user.id}").status_code == 404
    assert bob_client.get("/api/v1/users").json()["results"] == []


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "*", "%20"])
def test_unknown_ids_are_404(alice_client, bad_id):
    assert alice_client.get(f"/api/v1/users/{bad_id}").status_code == 404


@pytest.mark.parametrize("body", [{"external_id": "a\x00b"}, {"external_id": "ok", "metadata": {"k": "v\x00"}},
                                  {"external_id": "ok", "metadata": {"k\x00": 1}}])
def test_null_characters_are_400_not_500(alice_client, body):
    r = alice_client.post("/api/v1/users", body, format="json")
    assert r.status_code == 400, r.content
