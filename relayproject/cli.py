"""`webhook-relay`: the standalone relay, run from the installed package.

    webhook-relay web [gunicorn options]     gunicorn with the shipped config
    webhook-relay dispatcher [options]       manage.py run_dispatcher
    webhook-relay status [--json]            manage.py relay_status
    webhook-relay migrate                    and any other management command
    webhook-relay --version

Settings come from the environment, as for manage.py; DJANGO_SETTINGS_MODULE
defaults to relayproject.settings.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence

from relayproject import __version__

PROG = "webhook-relay"
DEFAULT_SETTINGS = "relayproject.settings"
# The shipped gunicorn settings (the source tree's gunicorn.conf.py imports them).
GUNICORN_CONFIG = "python:relayproject.gunicorn_conf"
WSGI_APP = "relayproject.wsgi"
DEFAULT_HOST = "0.0.0.0"  # noqa: S104 - a server in a container listens on all
DEFAULT_PORT = "8000"
# Short names for the commands a deployment runs most.
ALIASES = {"dispatcher": "run_dispatcher", "status": "relay_status"}

USAGE = f"""usage: {PROG} <command> [options]

  web [gunicorn options]   the web process: gunicorn with the shipped config,
                           on $HOST:$PORT ({DEFAULT_HOST}:{DEFAULT_PORT}) unless --bind
  dispatcher [options]     a dispatcher (manage.py run_dispatcher)
  status [--json]          pipeline health (manage.py relay_status)
  migrate                  apply migrations; run it before starting new versions
  <command> [options]      any management command ({PROG} help lists them)
  --version                the relay's version

Settings come from the environment (DJANGO_SETTINGS_MODULE: {DEFAULT_SETTINGS}).
"""


def _names(args: Sequence[str], short: str, long: str) -> bool:
    """True when args give the option: `-b X`, `-bX`, `--bind X`, `--bind=X`."""
    return any(
        arg in (short, long)
        or arg.startswith(f"{long}=")
        or (arg.startswith(short) and not arg.startswith("--"))
        for arg in args
    )


def gunicorn_argv(args: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """gunicorn's command line for `web`: the shipped config and a bind on
    HOST:PORT, each unless the options (or GUNICORN_CMD_ARGS) name their own."""
    own = [*args, *shlex.split(environ.get("GUNICORN_CMD_ARGS", ""))]
    argv = [sys.executable, "-m", "gunicorn"]
    if not _names(own, "-c", "--config"):
        argv += ["--config", GUNICORN_CONFIG]
    if not _names(own, "-b", "--bind"):
        host = environ.get("HOST") or DEFAULT_HOST
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # an IPv6 address
        argv += ["--bind", f"{host}:{environ.get('PORT') or DEFAULT_PORT}"]
    return [*argv, *args, WSGI_APP]


def management_argv(args: Sequence[str]) -> list[str]:
    """Django's command line for a management command (or one of ALIASES)."""
    command, *rest = args
    return [PROG, ALIASES.get(command, command), *rest]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(USAGE)
        return 0 if args else 2
    if args[0] == "--version":
        print(f"{PROG} {__version__}")
        return 0
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", DEFAULT_SETTINGS)
    if args[0] == "web":
        command = gunicorn_argv(args[1:], os.environ)
        sys.stdout.flush()
        sys.stderr.flush()
        # gunicorn takes this process over: signals from a container runtime
        # or systemd reach its master directly.
        os.execv(command[0], command)
    from django.core.management import execute_from_command_line

    execute_from_command_line(management_argv(args))
    return 0
