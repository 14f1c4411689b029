"""A run's architecture filter: the worker architectures its regex matches.

Python's `re` cannot be interrupted, so the pattern is evaluated in a child
process with a time limit. Blocking (a process start): called from the
threadpool, like the rest of run validation.
"""

import re
import subprocess
import sys

from arbiter.domain.errors import ValidationError
from arbiter.protocol.messages import SUPPORTED_ARCHS, WORKER_ARCHS

MAX_ARCH_FILTER_CHARS = 200
# Evaluating an arch filter runs in a child process with this time limit (s).
ARCH_FILTER_TIMEOUT = 2.0


def matching_archs(arch_filter: str, field: str = "arch_filter") -> frozenset[str]:
    """The worker_arch values an arch filter matches (`re.search`, as the reference).

    The regex is compiled here (length-capped) for a clear syntax error, then
    evaluated in a child process with a time limit: Python's `re` cannot be
    interrupted, and a pattern like `(.*.*.*)*!` backtracks for minutes even
    on these short names. Blocking (a process start): call it from the
    threadpool, like the rest of run validation.
    """
    if len(arch_filter) > MAX_ARCH_FILTER_CHARS:
        raise ValidationError(field, f"is longer than {MAX_ARCH_FILTER_CHARS} characters")
    try:
        re.compile(arch_filter)
    except (re.error, OverflowError, RecursionError, ValueError) as error:
        raise ValidationError(field, f"is not a valid regular expression: {error}") from None
    matched = _search_in_child(arch_filter, field)
    if not matched & set(SUPPORTED_ARCHS):
        raise ValidationError(field, "matches none of the supported architectures")
    return matched


_SEARCH_SCRIPT = (
    "import re, sys\n"
    "pattern, *names = sys.stdin.read().split('\\0')\n"
    "print('\\0'.join(n for n in names if re.search(pattern, n)), end='')\n"
)


def _search_in_child(pattern: str, field: str) -> frozenset[str]:
    # -I: isolated (no user site, no PYTHON* variables); the pattern travels on
    # stdin, never through a shell or argv.
    payload = "\0".join((pattern, *WORKER_ARCHS))
    try:
        done = subprocess.run(  # noqa: S603 (fixed argument list, our own interpreter)
            [sys.executable, "-I", "-c", _SEARCH_SCRIPT],
            input=payload,
            capture_output=True,
            text=True,
            timeout=ARCH_FILTER_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ValidationError(field, "takes too long to evaluate: simplify it") from None
    if done.returncode != 0:
        raise ValidationError(field, "could not be evaluated: simplify it")
    return frozenset(name for name in done.stdout.split("\0") if name)
