"""Log lines: human-readable by default, one JSON object per line with LOG_FORMAT=json.

Every line carries the ids in play, from two places: `extra={...}` on the call
(delivery_id, endpoint_id, event_id, merchant_id) and ids bound for a stretch
of work with `log_context` (and `log_process_bind` for the whole process: a
dispatcher's worker id). The current span's trace and span ids are added, so a log line finds
its trace. Callers pass ids only: never payloads, secrets, custom header
values or receiver bodies (tests/relayproject/lib/test_logs.py greps a run for them).

Portal link tokens are a credential in a URL: `TokenScrubFilter`, on the root
handler, rewrites `/portal/link/<token>/` in every line (the message, its
extras such as Django's `request`, and any traceback), Django's own
"Not Found"/"Gone" request lines and third-party loggers included.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
from collections.abc import Iterator

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter

ID_FIELDS = (
    "event_id",
    "delivery_id",
    "endpoint_id",
    "merchant_id",
    "worker",
    "request_id",
)

_bound: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "relay_log_context", default=None
)


@contextlib.contextmanager
def log_context(**ids: object) -> Iterator[None]:
    """Bind ids to every log line written inside the block (this thread/task)."""
    token = _bound.set({**(_bound.get() or {}), **{k: str(v) for k, v in ids.items()}})
    try:
        yield
    finally:
        _bound.reset(token)


_process_ids: dict[str, str] = {}


def log_process_bind(**ids: object) -> None:
    """Bind ids for every thread of this process (a dispatcher's worker id).

    Process-wide, not a context variable: a new thread starts with an empty
    context, and the dispatcher's send loop and database work run on two.
    """
    _process_ids.update({k: str(v) for k, v in ids.items()})


class IdsFilter(logging.Filter):
    """Puts the bound ids and the current trace/span ids on each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in {**_process_ids, **(_bound.get() or {})}.items():
            if not hasattr(record, key):
                setattr(record, key, value)
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            record.trace_id = format(span_context.trace_id, "032x")
            record.span_id = format(span_context.span_id, "016x")
        return True


# The portal's link route (relayproject/portal/urls.py, under /portal/ in the
# root URLconf). The token is url-safe base64; whatever follows the prefix up
# to a separator is treated as one, so a mangled or unknown token goes too.
LINK_TOKEN = re.compile(r"(/portal/link/)[^/\s?#'\"<>]+")
REDACTED = r"\1[redacted]"
# Attributes every LogRecord has; anything else on a record is an extra.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message"}
_PLAIN_TYPES = (int, float, bool, type(None))


def scrub_link_tokens(text: str) -> str:
    """The text with every portal link token replaced by [redacted]."""
    return LINK_TOKEN.sub(REDACTED, text) if "/portal/link/" in text else text


class TokenScrubFilter(logging.Filter):
    """Rewrites portal link tokens out of a record before any formatter sees it.

    On the handler rather than a logger: handler filters see the records that
    propagate from every logger (django.request, django.security, libraries).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)  # bad arguments: logging reports them itself
        scrubbed = scrub_link_tokens(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            if "/portal/link/" in text:
                # Both formatters print exc_text when exc_info is gone; other
                # handlers keep the record's exc_info when there is no token.
                record.exc_text, record.exc_info = text, None
        if record.exc_text:
            record.exc_text = scrub_link_tokens(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub_link_tokens(record.stack_info)
        for key, value in list(record.__dict__.items()):
            if key in _RECORD_FIELDS or isinstance(value, _PLAIN_TYPES):
                continue
            # Django passes the request object itself; the JSON formatter
            # prints its repr, which names the path.
            text = value if isinstance(value, str) else repr(value)
            if "/portal/link/" in text:
                setattr(record, key, scrub_link_tokens(text))
        return True


class JsonFormatter(_LibraryJsonFormatter):
    """python-json-logger, with the field names our log pipeline expects."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("fmt", "%(asctime)s %(levelname)s %(name)s %(message)s")
        kwargs.setdefault(
            "rename_fields",
            {"asctime": "timestamp", "levelname": "level", "name": "logger"},
        )
        kwargs.setdefault("timestamp", False)
        super().__init__(*args, **kwargs)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        import datetime

        moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PlainFormatter(logging.Formatter):
    """The human-readable line, with any ids in play appended as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = [
            f"{key}={getattr(record, key)}"
            for key in (*ID_FIELDS, "trace_id")
            if getattr(record, key, None) and f"{key.removesuffix('_id')}=" not in line
        ]
        return f"{line} [{' '.join(ids)}]" if ids else line


def logging_config(*, log_format: str, level: str) -> dict:
    """The LOGGING dict for settings: one console handler on the root logger."""
    formatter = "json" if log_format == "json" else "plain"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "ids": {"()": "relayproject.lib.logs.IdsFilter"},
            "scrub": {"()": "relayproject.lib.logs.TokenScrubFilter"},
        },
        "formatters": {
            "plain": {"()": "relayproject.lib.logs.PlainFormatter"},
            "json": {"()": "relayproject.lib.logs.JsonFormatter"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": formatter,
                "filters": ["ids", "scrub"],
            },
        },
        # The root logger, so Django's own (django.request 500s) and library
        # lines come out in the same format as ours.
        "root": {"handlers": ["console"], "level": "WARNING"},
        "loggers": {
            # Django's default config gives these handlers of their own (a
            # console one with DEBUG, the dev server's request lines), which
            # would print every line a second time without the scrub filter.
            "django": {"handlers": [], "level": "INFO", "propagate": True},
            "django.server": {
                "handlers": ["console"],
                "level": "INFO",
                "propagate": False,
            },
            "deliveries": {"level": level},
            "endpoints": {"level": level},
            "relayproject": {"level": level},
        },
    }
