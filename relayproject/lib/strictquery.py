"""Unknown query parameters are refused, on every API operation, in one place.

ninja ignores a query parameter an operation does not declare, so a typo
(`?endpoint=` for `?endpoint_id=`) silently widened a list to every row.
`strict_query` is added to the whole API (relayproject/api.py) and wraps
each operation's run: the names it accepts are those its signature declares
as Query, read once when the URLs are built. An unknown name is a 422
problem naming each one, after authentication (a caller without a key still
learns only that it needs one) and before anything else is read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from relayproject.lib.problems import problem_response


def declared_query_names(operation) -> frozenset[str]:
    """The query parameter names (aliases included) a ninja operation declares."""
    names: set[str] = set()
    for model in operation.models:
        if getattr(model, "__ninja_param_source__", None) == "query":
            names.update(model.__ninja_flatten_map__)
    return frozenset(names)


def strict_query(run: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """An `api.add_decorator(..., mode="view")` decorator: `run` is a bound
    Operation.run, whose operation says what it declares."""
    operation = run.__self__
    allowed = declared_query_names(operation)

    @functools.wraps(run)
    def checked(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        unknown = sorted(set(request.GET) - allowed)
        if not unknown:
            return run(request, *args, **kwargs)
        # run() would authenticate first; so does this refusal (ninja's own
        # check, the same one run() calls), so a 401 still comes before a 422.
        refused = operation._run_checks(request)
        if refused is not None:
            return refused
        known = ", ".join(sorted(allowed)) or "none"
        return problem_response(
            422,
            f"Unknown query parameter{'s' if len(unknown) > 1 else ''}: "
            f"{', '.join(unknown)} (this operation takes: {known}).",
            [
                {"loc": ["query", name], "msg": "Unknown query parameter."}
                for name in unknown
            ],
        )

    return checked
