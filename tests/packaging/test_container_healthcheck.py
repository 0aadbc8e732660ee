"""deploy/container/healthcheck.py's pure parts: which process is gunicorn,
where it listens, and the Host that ALLOWED_HOSTS accepts (the whole check
runs in the image: test_container_image.py)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.support.podman import ROOT

_spec = importlib.util.spec_from_file_location(
    "healthcheck", ROOT / "deploy" / "container" / "healthcheck.py"
)
healthcheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(healthcheck)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["/opt/venv/bin/python3", "-m", "gunicorn", "--bind", "0.0.0.0:8000"], True),
        (["/opt/venv/bin/python3", "/opt/venv/bin/gunicorn", "app"], True),
        (["gunicorn", "app"], True),
        (["/opt/venv/bin/python3", "/opt/venv/bin/webhook-relay", "dispatcher"], False),
        (["/run/podman-init", "--", "webhook-relay", "web"], False),
        ([], False),
    ],
)
def test_gunicorn_is_told_from_other_processes(argv, expected):
    assert healthcheck.is_gunicorn(argv) is expected


@pytest.mark.parametrize(
    ("args", "bind"),
    [
        (["--bind", "0.0.0.0:8000"], "0.0.0.0:8000"),
        (["-b", "[::]:9000"], "[::]:9000"),
        (["--bind=127.0.0.1:81"], "127.0.0.1:81"),
        (["-bunix:/tmp/g.sock"], "unix:/tmp/g.sock"),
        (["--workers", "4"], None),
    ],
)
def test_the_bind_is_read_in_each_of_gunicorns_spellings(args, bind):
    assert healthcheck.bind_of(args) == bind


@pytest.mark.parametrize(
    ("bind", "host", "port"),
    [
        ("0.0.0.0:8000", "127.0.0.1", 8000),
        ("[::]:9000", "::1", 9000),
        ("10.0.0.21:8000", "10.0.0.21", 8000),
        ("127.0.0.1", "127.0.0.1", 8000),
        ("[::1]", "::1", 8000),
    ],
)
def test_a_wildcard_bind_is_asked_on_loopback(bind, host, port):
    conn = healthcheck.connection(bind)
    assert (conn.host, conn.port) == (host, port)


@pytest.mark.parametrize(
    ("allowed_hosts", "host"),
    [
        ("", "127.0.0.1"),
        ("*", "localhost"),
        (".relay.test,other.example", "relay.test"),
        ("relay.example.com", "relay.example.com"),
        (" [::1] , x", "[::1]"),
    ],
)
def test_the_host_header_is_one_allowed_hosts_accepts(allowed_hosts, host):
    assert healthcheck.host_header(allowed_hosts) == host
