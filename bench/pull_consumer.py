"""One consumer of a pull endpoint, for bench/pull_bench.py: pull, verify, ack.

    python bench/pull_consumer.py --base http://127.0.0.1:8765 --key KEY \\
        --merchant bench --endpoint ep_... --secret whsec_... [--limit 100]

A process of its own, as a real consumer is, with one keep-alive connection
(http.client: the lightest client, so that on a shared machine the server's
work is what is timed). It prints "ready", starts pulling at the first line
on stdin and stops when stdin closes; it then times --idle-pulls pulls of
the drained endpoint, one after the other (what polling an empty endpoint
costs), and prints one JSON object: the latency of every pull and ack
(empty pulls during the drain apart, and the idle pulls), the ids it was handed, how
many it acked, how many the relay rejected or failed to verify, when its
first pull started and its last ack ended, and its own CPU seconds.

Every message is verified with the client library's `verify` (client/src):
a consumer that skipped it would be measuring less than a real one does.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client" / "src"))

from webhook_relay_client import InvalidSignature, verify  # noqa: E402

EMPTY_WAIT_SECONDS = 0.02  # between empty pulls while the others finish the drain


class Relay:
    """The two calls, over one kept-alive connection, each timed."""

    def __init__(self, base: str, *, key: str, merchant: str, endpoint: str) -> None:
        parts = urlsplit(base)
        self.connection = http.client.HTTPConnection(
            parts.hostname, parts.port, timeout=30
        )
        self.path = f"/api/v1/merchants/{merchant}/endpoints/{endpoint}/messages"
        self.headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
        }

    def call(self, method: str, path: str, body: dict | None = None) -> tuple:
        """(answer, milliseconds); a status other than 200 ends the run."""
        started = time.perf_counter()
        payload = None if body is None else json.dumps(body)
        self.connection.request(method, path, body=payload, headers=self.headers)
        response = self.connection.getresponse()
        data = response.read()
        took = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise SystemExit(f"{method} {path}: {response.status} {data[:300]!r}")
        return json.loads(data), took

    def pull(self, limit: int) -> tuple[list[dict], float]:
        answer, took = self.call("GET", f"{self.path}?limit={limit}")
        return answer["items"], took

    def ack(self, ids: list[str]) -> tuple[dict, float]:
        return self.call("POST", f"{self.path}/ack", {"ids": ids})


def consume(relay: Relay, *, secret: str, limit: int, stop: threading.Event) -> dict:
    pulls, empty, acks, seen = [], [], [], []
    acked = rejected = unverified = 0
    first_at = last_ack_at = None
    while not stop.is_set():
        if first_at is None:
            first_at = time.time()
        items, took = relay.pull(limit)
        if not items:
            empty.append(took)
            stop.wait(EMPTY_WAIT_SECONDS)
            continue
        pulls.append(took)
        good = []
        for item in items:
            seen.append(item["id"])
            try:
                verify(secret, item["headers"], item["body"].encode())
            except InvalidSignature:
                unverified += 1
                continue
            good.append(item["id"])
        if not good:
            continue
        answer, took = relay.ack(good)
        last_ack_at = time.time()
        acks.append(took)
        acked += len(answer["acked"])
        rejected += len(answer["rejected"])
    return {
        "pull_ms": pulls,
        "empty_pull_ms": empty,
        "ack_ms": acks,
        "ids": seen,
        "acked": acked,
        "rejected": rejected,
        "unverified": unverified,
        "first_at": first_at,
        "last_ack_at": last_ack_at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--merchant", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--idle-pulls", type=int, default=100)
    args = parser.parse_args()
    relay = Relay(
        args.base, key=args.key, merchant=args.merchant, endpoint=args.endpoint
    )
    relay.connection.connect()
    print("ready", flush=True)
    sys.stdin.readline()  # "go": every consumer starts at once
    stop = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    result = consume(relay, secret=args.secret, limit=args.limit, stop=stop)
    result["idle_pull_ms"] = []
    for _ in range(args.idle_pulls):
        items, took = relay.pull(args.limit)
        if items:  # nothing is due once the drain is over: say so if it was
            result.setdefault("late_items", 0)
            result["late_items"] += len(items)
        result["idle_pull_ms"].append(took)
    result["cpu_s"] = time.process_time()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
