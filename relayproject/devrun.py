"""`make run`: migrate, seed the demo, then the dev server and one dispatcher
together; Ctrl-C stops both.

A tiny supervisor rather than shell job control, so that SIGINT from the
terminal and SIGTERM from anything else stop both children cleanly. What a
newcomer needs stays on screen: migrations say one line (all of it if they
fail), the banner (logins, the one-time API key) prints once the server
answers and is kept in BANNER_FILE, and the dev server's request lines for
the demo receiver's page (it reloads every 3 s) and static files are left out.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

MANAGE = Path(__file__).resolve().parents[1] / "manage.py"
# In the directory `make run` runs in; .gitignore keeps it out of commits.
BANNER_FILE = ".dev-banner.txt"
READY_TIMEOUT = 60.0  # seconds for the dev server to answer /healthz
READY_POLL = 0.1  # seconds between those tries
# After Ctrl-C: how long web and dispatcher have to stop before they are
# killed (a dispatcher lets its sends in flight finish first, each bounded by
# HTTP_TIMEOUT_SECONDS).
STOP_GRACE_SECONDS = 15.0
# The dev server's request lines a person does not need to read: GETs of
# the demo receiver's self-reloading page and of static files.
QUIET_REQUESTS = re.compile(r'"GET /(?:static/|favicon\.ico|demo/receiver/)')


def keep_line(line: str) -> bool:
    """Whether a line of the dev server's output reaches the terminal."""
    return not QUIET_REQUESTS.search(line)


def main(host: str = "127.0.0.1", port: str = "8000") -> int:
    env = {**os.environ, "RELAY_ALLOW_PRIVATE_DESTINATIONS": "true"}
    manage = [sys.executable, str(MANAGE)]
    base_url = f"http://{host}:{port}"
    if not migrate(manage, env):
        return 1
    seeded = subprocess.run(
        [*manage, "seed_demo", "--base-url", base_url],
        env=env,
        capture_output=True,
        text=True,
    )
    if seeded.returncode != 0:
        sys.stderr.write(seeded.stdout + seeded.stderr)
        return seeded.returncode
    children = [
        subprocess.Popen([*manage, "run_dispatcher"], env=env),
        subprocess.Popen(
            [*manage, "runserver", "--noreload", f"{host}:{port}"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        ),
    ]
    server = children[1]
    threading.Thread(
        target=_copy_lines, args=(server.stderr, sys.stderr, keep_line), daemon=True
    ).start()

    def stop(*_args) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    # Shown late rather than never if the server is slow past READY_TIMEOUT.
    wait_until_answering(f"{base_url}/healthz", server)
    if server.poll() is None:
        show_banner(seeded.stdout, Path(BANNER_FILE))
    # When either child ends (crash or signal), stop the other too.
    while all(child.poll() is None for child in children):
        try:
            os.wait()
        except ChildProcessError:
            break
    stop()
    stopped_within(
        {"run_dispatcher": children[0], "runserver": children[1]}, STOP_GRACE_SECONDS
    )
    return 0


def stopped_within(children: dict[str, subprocess.Popen], grace: float) -> None:
    """Wait for the children to end; one still running after `grace` seconds
    is killed, and said so: Ctrl-C always ends `make run`, and a child that
    hangs on its way out is named instead of holding the terminal."""
    deadline = time.monotonic() + grace
    for name, child in children.items():
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(
                f"{name} did not stop within {grace:g} s; killed",
                file=sys.stderr,
                flush=True,
            )
            child.kill()
            child.wait()


def migrate(manage: list[str], env: dict[str, str]) -> bool:
    """Migrate, saying one line; everything it printed if it failed."""
    done = subprocess.run(
        [*manage, "migrate", "--noinput"], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        sys.stderr.write("Migrations failed; the relay was not started.\n")
        return False
    applied = done.stdout.count("  Applying ")
    print(
        f"Database ready ({applied} migrations applied)."
        if applied
        else "Database ready (no migrations to apply).",
        flush=True,
    )
    return True


def wait_until_answering(url: str, server: subprocess.Popen) -> bool:
    """Poll url until it answers 200; False if the server died or never did."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(READY_POLL)
    return False


def show_banner(text: str, path: Path) -> None:
    """Print the banner and keep the same text in path (owner-only: a key)."""
    banner = text.strip("\n") + f"\n\nThis text is kept in {path.resolve()}.\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when an older file was made otherwise
    with os.fdopen(fd, "w") as out:
        out.write(banner)
    print("\n" + banner, flush=True)


def _copy_lines(source: IO[str], target: IO[str], keep: Callable[[str], bool]) -> None:
    for line in source:
        if keep(line):
            target.write(line)
            target.flush()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
