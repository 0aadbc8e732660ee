"""What the schema check of one 256 KB event costs against adversarial schemas
(issue 19, item 3: a publish against any accepted schema costs bounded time).

For each schema below, the event's `data` is built to just under
MAX_EVENT_BYTES (256 KB by default) of JSON, then the check a publish runs
for every event (schema_safety.bounded_errors, as catalogue._data_problems
calls it) is timed ROUNDS times; the median and max in ms are printed with
the outcome (how many errors, or refused past the step budget), the steps
spent and the budget, and whether the save-time checks (schema_checks)
would have accepted the schema at all. Schemas a save refuses are timed
anyway: one stored before the caps existed is refused at load, but the
evaluator must stay bounded on its own.

    .venv/bin/python bench/schema_cost.py
    .venv/bin/python bench/schema_cost.py --rounds 3 --only required enum

No database and no Django: it imports only the two schema modules. Timings on
the shared machine are noisy; compare schemas within one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from endpoints import schema_checks, schema_safety  # noqa: E402

MAX_EVENT_BYTES = 262_144
ROUNDS = 5


def filled(make_item, wrap) -> object:
    """wrap([items...]) with as many items as fit under MAX_EVENT_BYTES."""
    one = len(json.dumps(make_item(0))) + 2
    count = MAX_EVENT_BYTES // one
    while len(json.dumps(wrap([make_item(i) for i in range(count)]))) > MAX_EVENT_BYTES:
        count = count * 9 // 10
    return wrap([make_item(i) for i in range(count)])


def keys_object(width: int) -> dict:
    count = MAX_EVENT_BYTES // (width + 12)
    return {f"key{i:0{width}d}": i for i in range(count)}


CASES = {
    "required": (
        {
            "properties": {
                "a": {"items": {"required": [f"k{i:06d}" for i in range(20_000)]}}
            }
        },
        filled(lambda i: {}, lambda items: {"a": items}),
    ),
    "dependentRequired": (
        {"items": {"dependentRequired": {"a": [f"k{i}" for i in range(20_000)]}}},
        filled(lambda i: {"a": 1}, list),
    ),
    "patternProperties": (
        {
            "patternProperties": {f"^p{i:05d}$": {} for i in range(2_000)},
            "additionalProperties": False,
        },
        keys_object(20),
    ),
    "items-type": (
        {"properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
        filled(lambda i: 1, lambda items: {"tags": items}),
    ),
    "enum-failing": (
        {"properties": {"tags": {"items": {"enum": [f"v{i}" for i in range(250)]}}}},
        filled(lambda i: 1, lambda items: {"tags": items}),
    ),
    "enum-passing": (
        {"properties": {"tags": {"items": {"enum": list(range(250))}}}},
        filled(lambda i: 249, lambda items: {"tags": items}),
    ),
    "const": (
        {"items": {"const": list(range(1_000))}},
        filled(lambda i: list(range(1_000)), list),
    ),
}


def run_once(validator, data) -> tuple[float, str, schema_safety.Budget]:
    budget = schema_safety.Budget(schema_safety.step_budget(data))
    started = time.perf_counter()
    try:
        errors = schema_safety.bounded_errors(validator, data, budget=budget)
        outcome = f"{len(errors)} errors"
    except schema_safety.SchemaTooCostly:
        outcome = "refused (budget)"
    return (time.perf_counter() - started) * 1000, outcome, budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--only", nargs="*", choices=list(CASES))
    args = parser.parse_args()
    print(f"{'schema':20} {'median ms':>10} {'max ms':>9}  outcome, steps/budget, save")
    for name in args.only or CASES:
        schema, data = CASES[name]
        validator = schema_safety.safe_validator(schema)
        saved = schema_checks.static_refusals(schema)
        times, outcome, budget = [], "", None
        for _ in range(args.rounds):
            ms, outcome, budget = run_once(validator, data)
            times.append(ms)
        save = "refused at save" if saved else "accepted at save"
        print(
            f"{name:20} {statistics.median(times):10.1f} {max(times):9.1f}  "
            f"{outcome}, {budget.spent}/{budget.steps}, {save}"
        )


if __name__ == "__main__":
    main()
