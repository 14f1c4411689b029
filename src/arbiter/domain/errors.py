"""What the domain reports to its callers, in words a user can read.

Nothing here knows about HTTP: the web layer maps each kind onto a status
(`arbiter.web.errors`), the CLI prints the message.
"""

import math


class DomainError(Exception):
    """A refusal with a user-facing message; `str(error)` is that message."""

    default_message = "The request was refused."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default_message)


class NotFound(DomainError):  # noqa: N818 - reads as what happened
    default_message = "Not found."


class PermissionDenied(DomainError):  # noqa: N818
    default_message = "You may not do that."


class InvalidCredentials(DomainError):  # noqa: N818
    # One message for an unknown user and a wrong password: no enumeration.
    default_message = "Invalid username or password."


class AccountBlocked(DomainError):  # noqa: N818
    default_message = "Your account is blocked."


class AccountPending(DomainError):  # noqa: N818
    default_message = "Your account is pending approval."


class ValidationError(DomainError):
    """Bad input for one field; forms show the message beside that field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class BadRequest(DomainError):  # noqa: N818
    """A request naming things that do not fit together (unknown task, not yours)."""


class Unauthorized(DomainError):  # noqa: N818
    """Known caller, but not allowed this act (the reference answers 401)."""


class RetryLater(DomainError):  # noqa: N818
    """A refusal that lifts by itself after `retry_after` seconds."""

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def wait_seconds(self) -> int:
        """The wait in whole seconds (as Retry-After says it), never 0."""
        return max(1, math.ceil(self.retry_after))


class TooManyAttempts(RetryLater):
    """Throttled: the message says how long to wait. One message for the account's
    and the address's throttle, known and unknown names alike: it tells no names."""

    default_message = "Too many failed attempts."

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        super().__init__(retry_after)
        told = message or self.default_message
        self.args = (f"{told} Try again in {self.wait_seconds} s.",)


class PasswordChecksBusy(RetryLater):
    """Every argon2 slot is taken and enough callers wait already (the server's
    state, not the caller's fault)."""

    default_message = "Too many password checks at once; retry shortly."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(1.0, message)


class GitBusy(RetryLater):
    """Every git slot of the server is taken (the server's state, not the caller's)."""

    default_message = "The server is reading too many repositories at once; retry shortly."


class SearchesBusy(RetryLater):
    """Every place for open-ended searches (the event log's query API) is taken, or
    searches have spent their share of CPU time (domain/search_time.py)."""

    default_message = "The server is running too many event-log searches; retry shortly."

    def __init__(self, retry_after: float = 1.0, message: str | None = None) -> None:
        super().__init__(retry_after, message or self.default_message)


class UploadQuotaReached(RetryLater):
    """The account has uploaded all it may in the last 24 hours (domain/files/upload_quota.py)."""


class TooManyGitReads(RetryLater):
    """This account already has its share of git operations in flight."""

    default_message = "You have too many submissions reading repositories at once."

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        super().__init__(retry_after)
        told = message or self.default_message
        self.args = (f"{told} Try again in {self.wait_seconds} s.",)
