"""Worker names, derived from `worker_info` (reference 1.1).

The long name tells machines apart on the dashboard; the short name is the
identity used for blocking, duplicate detection and the "seen runs" memory.
It keeps only the stable first group of `unique_key` (a user-chosen prefix), so
a restarted worker process, which gets a new UUID, is still the same machine.
"""

import re

from arbiter.protocol.messages import WorkerInfo

# What `short_worker_name` produces: a block URL (/workers/<short name>) is
# checked against it before any lookup.
SHORT_NAME_PATTERN = re.compile(r"[A-Za-z0-9]{2,}-[1-9][0-9]*cores-[0-9a-zA-Z]{2,8}")


def short_worker_name(username: str, concurrency: int, unique_key: str) -> str:
    """`<username>-<concurrency>cores-<uuid group 1>`."""
    return f"{username}-{concurrency}cores-{_groups(unique_key)[0]}"


def long_worker_name(username: str, concurrency: int, unique_key: str, modified: bool) -> str:
    """`<username>-<concurrency>cores-<uuid group 1>-<uuid group 2>`, plus `*`
    when the worker's files differ from the published ones."""
    short = short_worker_name(username, concurrency, unique_key)
    return long_from_short(short, unique_key, modified)


def long_from_short(short_name: str, unique_key: str, modified: bool) -> str:
    """The long name from the short one: the key's second group, `*` when modified."""
    groups = _groups(unique_key)
    second = f"-{groups[1]}" if len(groups) > 1 else ""
    return f"{short_name}{second}{'*' if modified else ''}"


def worker_names(info: WorkerInfo) -> tuple[str, str]:
    """(long name, short name) of a validated worker_info."""
    return (
        long_worker_name(info.username, info.concurrency, info.unique_key, info.modified),
        short_worker_name(info.username, info.concurrency, info.unique_key),
    )


def owner_of(worker_name: str) -> str:
    """The account a (short or long) worker name starts with."""
    return worker_name.split("-", 1)[0]


def short_from_long(long_name: str) -> str:
    """The machine a long name (as the event log keeps it) is a process of."""
    return "-".join(long_name.split("-")[:3])


def is_short_worker_name(text: str) -> bool:
    return SHORT_NAME_PATTERN.fullmatch(text) is not None


def _groups(unique_key: str) -> list[str]:
    return unique_key.split("-")
