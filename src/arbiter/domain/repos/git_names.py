"""What git accepts as a repository URL and as a ref name, checked before any
git command sees them (here, and on every worker that fetches the run).

Pure: the checks raise `ValidationError` with a message the test author can
act on; `refs.py` resolves the names these admit.
"""

import re
from collections.abc import Callable
from urllib.parse import urlsplit

from arbiter.domain.errors import ValidationError

MAX_REPO_CHARS = 500
MAX_REF_CHARS = 255
REPO_SCHEMES = ("https", "http", "ssh", "git", "file")

_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}", re.ASCII)
_SHORT_SHA = re.compile(r"[0-9a-fA-F]{7,39}", re.ASCII)
_SCP_LIKE = re.compile(
    r"(?P<user>[A-Za-z0-9_][A-Za-z0-9._-]*)@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*):.+"
)
# Characters git forbids anywhere in a ref name (git check-ref-format, rules 4, 5, 10).
_REF_FORBIDDEN = frozenset(" ~^:?*[\\")


def check_repo_url(url: str, field: str = "tests_repo") -> str:
    """A git URL we are willing to hand to `git` (here and on every worker).

    Accepted: https, http, ssh, git and file URLs, and scp-like user@host:path.
    Refused: other transports (git's `ext::` runs commands), whitespace and
    control characters, a leading '-' (it would be read as an option), and
    passwords in the URL (run arguments are public).
    """
    usage = "must be a git URL (https://, http://, ssh://, git://, file://) or user@host:path"
    if not url:
        raise ValidationError(field, f"is required: it {usage}")
    if len(url) > MAX_REPO_CHARS:
        raise ValidationError(field, f"is longer than {MAX_REPO_CHARS} characters")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValidationError(field, "must not contain spaces or control characters")
    if url.startswith("-"):
        raise ValidationError(field, "must not start with '-'")
    if "://" not in url:
        if _SCP_LIKE.fullmatch(url) is None:
            raise ValidationError(field, usage)
        return url
    return _check_url(url, field, usage)


def _check_url(url: str, field: str, usage: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        password = parts.password
    except ValueError:
        raise ValidationError(field, usage) from None
    if parts.scheme.lower() not in REPO_SCHEMES:
        raise ValidationError(field, usage)
    if password is not None:
        raise ValidationError(field, "must not contain a password: run arguments are public")
    if parts.scheme.lower() != "file" and (not host or host.startswith("-")):
        raise ValidationError(field, "needs a host name")
    if parts.path.strip("/") == "":
        raise ValidationError(field, "needs a repository path")
    return url


def is_full_sha(text: str) -> bool:
    return _FULL_SHA.fullmatch(text) is not None


def is_short_sha(text: str) -> bool:
    return _SHORT_SHA.fullmatch(text) is not None


def check_ref(ref: str, field: str) -> str:
    """A branch or tag name by `git check-ref-format` rules, or a 7-40 hex SHA."""
    if not ref:
        raise ValidationError(field, "is required: give a branch, a tag or a commit SHA")
    if is_full_sha(ref) or is_short_sha(ref):
        return ref
    problem = _ref_problem(ref)
    if problem is not None:
        raise ValidationError(field, f"{ref!r} is not a valid branch or tag name: {problem}")
    return ref


# git check-ref-format's rules (onelevel names allowed, as for a branch), each
# with the explanation a user sees; plus a leading '-', which git would read
# as an option.
_REF_RULES: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda ref: len(ref) > MAX_REF_CHARS, f"longer than {MAX_REF_CHARS} characters"),
    (lambda ref: ref.startswith("-"), "it starts with '-'"),
    (
        lambda ref: any(ord(c) < 0x20 or ord(c) == 0x7F or c in _REF_FORBIDDEN for c in ref),
        "spaces, control characters and ~ ^ : ? * [ \\ are not allowed",
    ),
    (lambda ref: ref == "@" or "@{" in ref, "'@' alone and '@{' are not allowed"),
    (lambda ref: ".." in ref, "'..' is not allowed"),
    (
        lambda ref: ref.startswith("/") or ref.endswith("/") or "//" in ref,
        "empty path components are not allowed",
    ),
    (lambda ref: ref.endswith("."), "it ends with '.'"),
    (
        lambda ref: any(p.startswith(".") or p.endswith(".lock") for p in ref.split("/")),
        "a component starts with '.' or ends with '.lock'",
    ),
)


def _ref_problem(ref: str) -> str | None:
    for broken, explanation in _REF_RULES:
        if broken(ref):
            return explanation
    return None
