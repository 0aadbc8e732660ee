"""A pull endpoint's consumer, a process of its own for the acceptance tests
(tests/acceptance/test_pull_*.py): it pulls, acks (or nacks, or lets a lease
run out), and writes each step as a JSON line to --out, flushed at once, so
what it did survives a SIGKILL. Plain urllib, nothing of the relay imported:
a consumer is only an HTTP client.

    python tests/support/pull_consumer.py --url http://127.0.0.1:8000/api/v1/\
merchants/acme/endpoints/ep_.../messages --key rk_... --out consumer.jsonl

Lines: {"leased": id, "attempt", "lease_expires_at", "data"} per message
handed out; {"acked": [...], "rejected": [...]} and {"nacked": ...} per
answer; {"dropped": id} for a lease left to run out; {"stalled": true} when
it stops answering (--stall-after) and waits to be killed; {"error": ...}.
SIGTERM ends it after the current step.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import urllib.error
import urllib.request

EMPTY_WAIT_SECONDS = 0.05  # after a pull that found nothing: a consumer's poll
TIMEOUT_SECONDS = 30.0


class Consumer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = open(args.out, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        self.stopping = False
        self.answered = 0  # messages acked, nacked or dropped so far

    def write(self, record: dict) -> None:
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def call(self, method: str, path: str = "", body: dict | None = None) -> dict:
        request = urllib.request.Request(
            self.args.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self.args.key}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return json.loads(response.read())

    def run(self) -> None:
        while not self.stopping:
            try:
                self.step()
            except (urllib.error.URLError, OSError, ValueError) as exc:
                self.write({"error": repr(exc)})
                time.sleep(EMPTY_WAIT_SECONDS)

    def step(self) -> None:
        items = self.call("GET", f"?limit={self.args.limit}")["items"]
        if not items:
            time.sleep(EMPTY_WAIT_SECONDS)
            return
        for item in items:
            self.write(
                {
                    "leased": item["id"],
                    "attempt": item["attempt"],
                    "lease_expires_at": item["lease_expires_at"],
                    "data": json.loads(item["body"])["data"],
                }
            )
        ack, nack = [], []
        for item in items:
            if self.args.stall_after is not None and (
                self.answered >= self.args.stall_after
            ):
                self.flush(ack, nack)
                self.write({"stalled": True})
                while not self.stopping:  # holding the rest until killed
                    signal.pause()
                return
            self.answered += 1
            choice = self.choose(item)
            if choice == "drop":
                self.write({"dropped": item["id"]})
            else:
                (ack if choice == "ack" else nack).append(item["id"])
            if self.args.answer_each:
                self.flush(ack, nack)
                ack, nack = [], []
        self.flush(ack, nack)

    def choose(self, item: dict) -> str:
        """Only a first attempt is dropped or nacked: every message ends acked."""
        first, n = item["attempt"] == 1, self.answered
        if first and self.args.drop_every and n % self.args.drop_every == 0:
            return "drop"
        if first and self.args.nack_every and n % self.args.nack_every == 0:
            return "nack"
        return "ack"

    def flush(self, ack: list[str], nack: list[str]) -> None:
        if ack:
            answer = self.call("POST", "/ack", {"ids": ack})
            self.write({"acked": answer["acked"], "rejected": answer["rejected"]})
        if nack:
            answer = self.call("POST", "/nack", {"ids": nack, "retry_after_seconds": 0})
            self.write({"nacked": answer["nacked"], "rejected": answer["rejected"]})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the endpoint's .../messages")
    parser.add_argument("--key", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument(
        "--drop-every", type=int, default=0, help="leave every Nth lease to expire"
    )
    parser.add_argument(
        "--nack-every", type=int, default=0, help="nack every Nth answer"
    )
    parser.add_argument(
        "--stall-after",
        type=int,
        default=None,
        help="after N answers, stop mid-batch holding the rest, until killed",
    )
    parser.add_argument(
        "--answer-each", action="store_true", help="one ack or nack per message"
    )
    consumer = Consumer(parser.parse_args(argv))

    def stop(*_) -> None:
        consumer.stopping = True

    signal.signal(signal.SIGTERM, stop)
    consumer.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
