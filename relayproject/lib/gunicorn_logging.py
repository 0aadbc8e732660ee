"""gunicorn's logger, with portal link tokens scrubbed from both of its logs.

gunicorn writes its access and error logs through handlers of its own, which
the root handler's TokenScrubFilter (relayproject/lib/logs.py) never sees; its
access line holds the request line, the path and the Referer, and its error
lines the URI of a request that failed, each of which can carry
`/portal/link/<token>/`. Start gunicorn with
`--logger-class relayproject.lib.gunicorn_logging.ScrubbingLogger` (or
`logger_class` in its config file).
"""

from __future__ import annotations

from gunicorn.glogging import Logger

from relayproject.lib.logs import TokenScrubFilter


class ScrubbingLogger(Logger):
    def setup(self, cfg) -> None:
        # setup() builds the handlers, again on every reload: filter the new ones.
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if not any(isinstance(f, TokenScrubFilter) for f in handler.filters):
                    handler.addFilter(TokenScrubFilter())
