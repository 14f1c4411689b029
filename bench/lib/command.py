"""The command line a benchmark report records: the one that ran, read from
sys.argv, never a fixed string. Database URLs are replaced by a placeholder
(they may carry a password); everything else is kept as typed."""

import os
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = "<database URL>"
SECRET_OPTIONS = ("--database-url",)
SECRET_ENVIRONMENT = ("ARBITER_TEST_POSTGRES_URL",)


def command_line(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> str:
    """`python bench/<script>.py <its arguments>`, prefixed with the environment
    variables of SECRET_ENVIRONMENT the run was given (their values hidden)."""
    argv = sys.argv if argv is None else argv
    environ = dict(os.environ) if environ is None else environ
    script = Path(argv[0]).resolve()
    shown = str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else argv[0]
    arguments: list[str] = []
    hide_next = False
    for argument in argv[1:]:
        if hide_next:
            arguments.append(HIDDEN)
            hide_next = False
        elif argument in SECRET_OPTIONS:
            arguments.append(argument)
            hide_next = True
        elif argument.startswith(tuple(f"{option}=" for option in SECRET_OPTIONS)):
            arguments.append(argument.split("=", 1)[0] + "=" + HIDDEN)
        else:
            arguments.append(argument)
    prefix = [f"{name}={HIDDEN}" for name in SECRET_ENVIRONMENT if environ.get(name)]
    return " ".join([*prefix, "python", shown, *(shlex.quote(a) for a in arguments)])
