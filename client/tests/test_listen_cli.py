"""`webhook-relay-client listen`'s options: flags, the environment's
defaults, and the usage errors a person sees (never with the API key)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from webhook_relay_client.cli import listen_options

SRC = Path(__file__).resolve().parents[1] / "src"
KEY = "rk_live_secret_value"
ENV = {
    "WEBHOOK_RELAY_URL": "http://relay.test",
    "WEBHOOK_RELAY_API_KEY": KEY,
    "WEBHOOK_RELAY_MERCHANT": "acme",
}
FORWARD = ["listen", "--forward-to", "http://localhost:3000/webhooks"]


def test_the_environment_gives_the_url_key_and_merchant():
    options = listen_options(FORWARD, ENV)
    assert (options.url, options.api_key, options.merchant) == (
        "http://relay.test",
        KEY,
        "acme",
    )
    assert options.forward_to == "http://localhost:3000/webhooks"
    assert (options.events, options.session, options.timeout) == ([], None, 10.0)


def test_options_win_over_the_environment():
    options = listen_options(
        [*FORWARD, "--url", "https://other.test", "--api-key", "k2"]
        + ["--merchant", "globex", "--session", "ep_1", "--timeout", "2.5"],
        ENV,
    )
    assert (options.url, options.api_key, options.merchant) == (
        "https://other.test",
        "k2",
        "globex",
    )
    assert (options.session, options.timeout) == ("ep_1", 2.5)


def test_events_take_several_values_and_repeat():
    options = listen_options(
        [*FORWARD, "--events", "order.*", "invoice.paid", "--events", "refund.*"], ENV
    )
    assert options.events == ["order.*", "invoice.paid", "refund.*"]


def test_what_is_missing_is_named_and_the_key_is_never_shown(capsys):
    with pytest.raises(SystemExit) as exited:
        listen_options(FORWARD, {"WEBHOOK_RELAY_API_KEY": KEY})
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "missing --url (or $WEBHOOK_RELAY_URL), --merchant" in error
    assert "--api-key" not in error.split("missing")[1]
    assert KEY not in error


@pytest.mark.parametrize(
    "url",
    [
        "ftp://localhost/hooks",
        "localhost:3000/webhooks",
        "http:///nohost",
        "http://h:x/",
    ],
)
def test_only_an_http_or_https_forward_url_is_taken(url, capsys):
    with pytest.raises(SystemExit) as exited:
        listen_options(["listen", "--forward-to", url], ENV)
    assert exited.value.code == 2
    assert "--forward-to" in capsys.readouterr().err


def test_the_relay_url_must_be_http_or_https(capsys):
    with pytest.raises(SystemExit):
        listen_options(FORWARD, {**ENV, "WEBHOOK_RELAY_URL": "relay.test"})
    assert "--url (or $WEBHOOK_RELAY_URL) must be the relay's http(s) URL, not " in (
        capsys.readouterr().err
    )


def test_a_timeout_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        listen_options([*FORWARD, "--timeout", "0"], ENV)
    assert "--timeout must be more than 0 seconds" in capsys.readouterr().err


def test_the_module_runs_as_the_command():
    done = subprocess.run(
        [sys.executable, "-m", "webhook_relay_client", "listen", "--help"],
        env={"PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: webhook-relay-client listen" in done.stdout
    assert "--forward-to URL" in done.stdout
