"""The client library as users get it: its wheel built from client/, installed
alone in a fresh virtualenv (it has no dependency to bring), importing and
verifying a webhook the server's own signing made, with nothing of this tree
on the path."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile

import pytest

from deliveries import signing
from tests.support.processes import ROOT

pytestmark = [pytest.mark.acceptance]

CHECK = """
import json, sys, webhook_relay_client as c
got = json.loads(sys.argv[1])
print(c.__version__)
print(json.dumps(c.verify(got["secret"], got["headers"], got["body"].encode())))
try:
    c.verify(got["secret"], got["headers"], got["body"].encode() + b" ")
except c.InvalidSignature:
    print("tampered body refused")
"""


def test_the_client_wheel_installs_alone_and_verifies_the_servers_signature(
    tmp_path,
):
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path)]
        + [str(ROOT / "client")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("webhook_relay_client-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith("/METADATA")]
        needs = [
            line
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line
        ]
    assert needs == []  # its own tests' extra aside
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
        + ["install", "--quiet", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = json.dumps({"type": "order.paid", "data": {"n": 1}})
    stamp = int(time.time())
    headers = {
        "webhook-id": "evt_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": signing.signature_header(
            secrets=[secret], msg_id="evt_1", timestamp=stamp, body=body.encode()
        ),
    }
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-I", "-c", CHECK]
        + [json.dumps({"secret": secret, "headers": headers, "body": body})],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "0.1.0",
        json.dumps({"type": "order.paid", "data": {"n": 1}}),
        "tampered body refused",
    ]
    # The console command the wheel installs: `listen` is there, and says
    # what it needs without a relay to talk to.
    command = subprocess.run(
        [str(venv / "bin" / "webhook-relay-client"), "listen", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert command.returncode == 0, command.stderr
    assert "--forward-to" in command.stdout
