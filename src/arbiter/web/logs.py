"""Log set-up for `arbiter serve`: text for a terminal, JSON for a collector.

`ARBITER_LOG_FORMAT=json` writes each record as one JSON object per line:
`time` (ISO 8601, UTC), `level`, `logger`, `message`, `request_id` ("-"
outside a request), `exception` when there is one, and for access lines their
fields (`method`, `route`, `status`, `duration_ms`, `client`, `user`). The
text format carries the request id too, after the logger's name.
"""

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from arbiter.web.request_id import current_request_id

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"
# Fields a record may carry for the JSON format (`extra={"fields": {...}}`).
FIELDS_ATTRIBUTE = "fields"


class RequestIdFilter(logging.Filter):
    """Stamps each record with the id of the request it was written for."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", current_request_id()),
        }
        fields = getattr(record, FIELDS_ATTRIBUTE, None)
        if isinstance(fields, dict):
            document.update(fields)
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        return json.dumps(document, ensure_ascii=False, default=str)


def configure_logging(level: str, log_format: str, stream: TextIO = sys.stderr) -> None:
    """Replace the root logger's handlers with one that writes `log_format` to `stream`."""
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
