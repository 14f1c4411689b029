"""Checks on the fields a user types about themselves (name, email, tests repo)."""

import re

from arbiter.domain.errors import ValidationError

USERNAME = re.compile(r"[A-Za-z0-9]{2,32}")
# Syntax only: this server may not reach DNS, and an approver reviews signups anyway.
EMAIL = re.compile(r"[^@\s]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)+")
REPOSITORY = re.compile(r"https://[A-Za-z0-9.-]+(?::\d+)?/[^\s?#]+")
MAX_EMAIL = 254
MAX_REPOSITORY = 300
MAX_TOKEN_LABEL = 64


def check_username(username: str) -> str:
    if not USERNAME.fullmatch(username):
        raise ValidationError(
            "username", "Use 2 to 32 letters and digits (no spaces or punctuation)."
        )
    return username


def username_key(username: str) -> str:
    """The form in which every spelling of one account's name is the same ("Alice",
    "ALICE", "alice"): how names are looked up, and how anything counted or owned
    under a name is compared."""
    return username.casefold()


def same_username(first: str, second: str) -> bool:
    return username_key(first) == username_key(second)


def check_email(email: str) -> str:
    email = email.strip()
    if len(email) > MAX_EMAIL or not EMAIL.fullmatch(email):
        raise ValidationError("email", "Enter a valid email address, like name@example.org.")
    return email


def check_tests_repo(url: str) -> str:
    """Empty (use the default repository) or an https URL of a git repository."""
    url = url.strip().removesuffix("/")
    if url and (len(url) > MAX_REPOSITORY or not REPOSITORY.fullmatch(url)):
        raise ValidationError(
            "tests_repo", "Enter an https URL, like https://github.com/you/Stockfish."
        )
    return url


def check_token_label(label: str) -> str:
    label = label.strip()
    if len(label) > MAX_TOKEN_LABEL:
        raise ValidationError("label", f"Use at most {MAX_TOKEN_LABEL} characters.")
    return label
