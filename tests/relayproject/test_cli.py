"""`webhook-relay`: its command lines, and a management command run in-process.

The installed command itself (a wheel in a fresh virtualenv, gunicorn
answering, a dispatcher draining) is tests/acceptance/test_wheel_in_host_project.py.
"""

from __future__ import annotations

import json
import sys

import pytest

from relayproject import __version__
from relayproject.cli import gunicorn_argv, main, management_argv

GUNICORN = [sys.executable, "-m", "gunicorn"]
CONFIG = ["--config", "python:relayproject.gunicorn_conf"]


def test_web_listens_on_host_and_port_from_the_environment():
    assert gunicorn_argv(["--workers", "3"], {"HOST": "127.0.0.1", "PORT": "9000"}) == [
        *GUNICORN,
        *CONFIG,
        *("--bind", "127.0.0.1:9000"),
        *("--workers", "3"),
        "relayproject.wsgi",
    ]


def test_web_listens_on_every_address_on_port_8000_unless_told():
    assert gunicorn_argv([], {}) == [
        *GUNICORN,
        *CONFIG,
        *("--bind", "0.0.0.0:8000"),
        "relayproject.wsgi",
    ]


def test_an_ipv6_host_is_bracketed():
    assert "[::]:8000" in gunicorn_argv([], {"HOST": "::"})


@pytest.mark.parametrize(
    ("args", "environ"),
    [
        (["--bind", "unix:/run/relay.sock"], {}),
        (["-b", "unix:/run/relay.sock"], {}),
        (["--bind=unix:/run/relay.sock"], {}),
        (["-bunix:/run/relay.sock"], {}),
        ([], {"GUNICORN_CMD_ARGS": "--workers 2 --bind unix:/run/relay.sock"}),
    ],
)
def test_a_bind_of_its_own_replaces_host_and_port(args, environ):
    argv = gunicorn_argv(args, {"HOST": "127.0.0.1", "PORT": "9000", **environ})
    assert "127.0.0.1:9000" not in argv
    assert argv[-1] == "relayproject.wsgi"


@pytest.mark.parametrize("args", [["-c", "my.conf.py"], ["--config=my.conf.py"]])
def test_a_config_of_its_own_replaces_the_shipped_one(args):
    assert gunicorn_argv(args, {}) == [
        *GUNICORN,
        *("--bind", "0.0.0.0:8000"),
        *args,
        "relayproject.wsgi",
    ]


@pytest.mark.parametrize(
    ("args", "argv"),
    [
        (["dispatcher", "--drain"], ["webhook-relay", "run_dispatcher", "--drain"]),
        (["status", "--json"], ["webhook-relay", "relay_status", "--json"]),
        (["migrate", "--no-input"], ["webhook-relay", "migrate", "--no-input"]),
        (["prune_deliveries", "--older-than", "30"], None),
    ],
)
def test_short_names_stand_for_their_management_commands(args, argv):
    assert management_argv(args) == (argv or ["webhook-relay", *args])


def test_version_is_the_packages(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"webhook-relay {__version__}\n"


def test_no_command_prints_the_usage_and_fails(capsys):
    assert main([]) == 2
    assert "web [gunicorn options]" in capsys.readouterr().err


@pytest.mark.django_db
def test_a_management_command_runs_in_this_process(capsys):
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["pending"] == 0
