"""Where webhooks may be sent: public http(s) URLs; private, loopback and link-local targets are refused when the
endpoint is saved (literal hosts) and before every attempt (what the host resolves to)."""
from __future__ import annotations

import pytest

from infra.errors import ValidationFailed
from webhooks.targets import TargetRefused, TargetUnresolved, webhook_target_check, webhook_url_clean


@pytest.fixture(autouse=True)
def _private_refused(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/x", "http://127.8.9.10/x", "http://localhost:8000/x", "http://api.localhost/x",
    "http://10.1.2.3/x", "http://172.16.0.1/x", "http://192.168.1.1/x", "http://169.254.169.254/x",
    "http://[::1]/x", "http://[fd00::1]/x", "http://[::ffff:127.0.0.1]/x", "http://0.0.0.0/x", "http://224.0.0.1/x",
])
def test_private_and_loopback_hosts_are_refused(url):
    with pytest.raises(ValidationFailed) as caught:
        webhook_url_clean(url)
    assert caught.value.code == "url_not_allowed"


@pytest.mark.parametrize("url", ["https://hooks.example.com/continuum", "http://93.184.215.14:8080/h",
                                 "https://[2606:4700::1111]/h"])
def test_public_urls_are_kept(url):
    assert webhook_url_clean(f"  {url} ") == url


@pytest.mark.parametrize("url", ["ftp://hooks.example.com/x", "https:///x", "https://u:p@hooks.example.com/x",
                                 "https://hooks.example.com:99999/x", "https://hooks.example.com/a b", "", None, 7,
                                 "https://h.example.com/" + "a" * 2000])
def test_malformed_urls_are_refused(url):
    with pytest.raises(ValidationFailed):
        webhook_url_clean(url)


def test_a_host_that_resolves_to_loopback_is_refused_at_delivery():
    with pytest.raises(TargetRefused, match="127.0.0.1"):
        webhook_target_check("http://localhost:9/x")


def test_a_host_that_does_not_resolve_is_worth_a_retry():
    with pytest.raises(TargetUnresolved):
        webhook_target_check("https://no-such-host.invalid/x")


def test_a_deployment_may_allow_private_targets(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    assert webhook_url_clean("http://127.0.0.1:9000/x") == "http://127.0.0.1:9000/x"
    webhook_target_check("http://localhost:9/x")
