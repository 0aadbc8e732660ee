"""What signing costs a send, v1 (HMAC-SHA256) beside v1a (Ed25519) and both
(issue 42 item 4).

Times deliveries.signing.signature_header, the call signed_request makes once
per send, for a 600-byte body with one live secret: signatures per second of
one thread, the best of REPEATS runs of CALLS calls; alone, and beside a
thread that keeps the GIL busy (the dispatcher's other threads), where a call
that lets go of the GIL waits up to the switch interval to get it back (issue
21: why hmac_sha256 keeps it). No database, no network: pure CPU.

    .venv/bin/python bench/signing_cost.py
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deliveries.signing import signature_header  # noqa: E402
from endpoints.secrets import generate_secret  # noqa: E402
from endpoints.signing_keys import key_pair_generate  # noqa: E402

CALLS = 20_000
BUSY_CALLS = 2_000
REPEATS = 5
BODY = b'{"id":"evt_1","type":"order.paid","data":{"pad":"' + b"x" * 540 + b'"}}'


def per_second(scheme: str, *, calls: int) -> float:
    secret, (private, _) = generate_secret(), key_pair_generate()
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for n in range(calls):
            signature_header(
                secrets=[secret],
                msg_id="evt_1",
                timestamp=1_700_000_000 + n,
                body=BODY,
                scheme=scheme,
                private_key=private,
            )
        best = min(best, time.perf_counter() - started)
    return calls / best


def busy_beside(run):
    """run() while another thread spins in Python, holding the GIL."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        return run()
    finally:
        stop.set()
        spinner.join()


def main() -> None:
    print(f"signature_header, {len(BODY)}-byte body, one secret; best of {REPEATS}")
    print(
        "| scheme | alone (signatures/s) | us each | beside a busy thread | us each |"
    )
    print("|---|---:|---:|---:|---:|")
    for scheme in ("v1", "v1a", "both"):
        alone = per_second(scheme, calls=CALLS)
        busy = busy_beside(lambda s=scheme: per_second(s, calls=BUSY_CALLS))
        print(
            f"| {scheme} | {alone:,.0f} | {1e6 / alone:.1f} "
            f"| {busy:,.0f} | {1e6 / busy:.1f} |"
        )


if __name__ == "__main__":
    main()
