"""The `webhook-relay-client` command (also `python -m webhook_relay_client`).

One subcommand so far, `listen`. The relay's URL, API key and merchant come
from options or from WEBHOOK_RELAY_URL, WEBHOOK_RELAY_API_KEY and
WEBHOOK_RELAY_MERCHANT; the key is never printed, and an option on the
command line shows in the process list, so the environment is the better
place for it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook_relay_client.client import Client
from webhook_relay_client.forwarding import FORWARD_TIMEOUT, forward_url_check
from webhook_relay_client.listen import Listener, ListenError
from webhook_relay_client.version import __version__

ENV_URL = "WEBHOOK_RELAY_URL"
ENV_API_KEY = "WEBHOOK_RELAY_API_KEY"
ENV_MERCHANT = "WEBHOOK_RELAY_MERCHANT"
EXIT_FAILED = 1  # the relay refused, or the session could not be ended
EXIT_INTERRUPTED = 130  # a second Ctrl-C: stopped at once (128 + SIGINT)


def parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The whole command, and its `listen` (whose usage its errors show)."""
    command = argparse.ArgumentParser(
        prog="webhook-relay-client",
        description="Command-line tools of the webhook-relay client.",
    )
    command.add_argument("--version", action="version", version=__version__)
    commands = command.add_subparsers(dest="command", required=True)
    listen = commands.add_parser(
        "listen",
        help="forward a merchant's webhooks to a local URL",
        description=(
            "Start a listen session on the relay and forward each of its "
            "webhooks to a local URL, with the headers and exact body the "
            "relay signed. A 2xx answer acks it; anything else nacks it, and "
            "the relay retries it. Ctrl-C stops and ends the session."
        ),
    )
    listen.add_argument(
        "--forward-to",
        required=True,
        metavar="URL",
        help="where to POST each webhook, e.g. http://localhost:3000/webhooks",
    )
    listen.add_argument(
        "--events",
        action="extend",
        nargs="+",
        default=[],
        metavar="TYPE",
        help="event types to receive ('order.*' for a family); default: all",
    )
    listen.add_argument(
        "--merchant",
        default=None,
        metavar="SLUG",
        help=f"the merchant whose events to forward (default: ${ENV_MERCHANT})",
    )
    listen.add_argument(
        "--session",
        default=None,
        metavar="ID",
        help="attach to a session started in the portal instead of starting one",
    )
    listen.add_argument(
        "--url",
        default=None,
        metavar="RELAY_URL",
        help=f"the relay's base URL (default: ${ENV_URL})",
    )
    listen.add_argument(
        "--api-key",
        default=None,
        metavar="KEY",
        help=f"an API key for the merchant (default: ${ENV_API_KEY})",
    )
    listen.add_argument(
        "--timeout",
        type=float,
        default=FORWARD_TIMEOUT,
        metavar="SECONDS",
        help=f"how long the local URL may take to answer (default: {FORWARD_TIMEOUT:g})",
    )
    return command, listen


def listen_options(
    argv: Sequence[str], environ: Mapping[str, str]
) -> argparse.Namespace:
    """The parsed options with the environment's defaults filled in; exits
    with status 2 and a usage message when something needed is missing."""
    command, listen_command = parsers()
    options = command.parse_args(argv)
    options.url = options.url or environ.get(ENV_URL, "")
    options.api_key = options.api_key or environ.get(ENV_API_KEY, "")
    options.merchant = options.merchant or environ.get(ENV_MERCHANT, "")
    missing = [
        f"{flag} (or ${env})"
        for flag, env, value in (
            ("--url", ENV_URL, options.url),
            ("--api-key", ENV_API_KEY, options.api_key),
            ("--merchant", ENV_MERCHANT, options.merchant),
        )
        if not value
    ]
    if missing:
        listen_command.error("missing " + ", ".join(missing))
    relay = urllib.parse.urlsplit(options.url)
    if relay.scheme not in ("http", "https") or not relay.netloc:
        listen_command.error(
            f"--url (or ${ENV_URL}) must be the relay's http(s) URL, "
            f"not {options.url!r}"
        )
    if not options.timeout > 0:
        listen_command.error("--timeout must be more than 0 seconds")
    try:
        forward_url_check(options.forward_to)
    except ValueError as error:
        listen_command.error(str(error))
    return options


def listen(
    options: argparse.Namespace,
    *,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    """Run `listen` until SIGINT or SIGTERM; the exit status. `out` prints
    what a person watches, `err` why it stopped when it could not go on."""
    stopping = threading.Event()
    # The client's own retry waits end as soon as stopping begins.
    client = Client(options.url, options.api_key, sleep=stopping.wait)
    listener = Listener(
        client,
        merchant=options.merchant,
        forward_to=options.forward_to,
        stopping=stopping,
        forward_timeout=options.timeout,
        out=out,
    )
    _on_stop_signals(listener)
    try:
        listener.start(event_types=options.events, session_id=options.session)
        listener.run()
    except ListenError as error:
        err(f"error: {error}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err(
            f"Stopped at once: listen session {listener.session_id or '(none)'} "
            "may not have been ended; the relay ends it after its idle time."
        )
        return EXIT_INTERRUPTED
    return 0


def _on_stop_signals(listener: Listener) -> None:
    """The first SIGINT or SIGTERM stops cleanly; a second one stops at once."""

    def handle(signum: int, frame: Any) -> None:
        if listener.stopping.is_set():
            raise KeyboardInterrupt
        listener.stop()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)


# Flushed at once: the output is often piped (tee, a test), and a line that
# waits in a buffer tells nobody anything.


def _out(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> int:
    options = listen_options(
        sys.argv[1:] if argv is None else argv,
        os.environ if environ is None else environ,
    )
    return listen(options, out=_out, err=_err)
