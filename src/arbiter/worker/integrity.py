"""Whether this worker's own files are still those it was installed with: the
`modified` flag of its `worker_info` (the reference's worker checks its files
against published hashes; a modified worker's name gets a `*` on the server,
so approvers can tell its results apart).

pip writes every installed file's SHA-256 into the distribution's RECORD,
and a worker is installed from the server's signed package (self-update) or
with pip: its package's files are compared with that record once, at start.
A source checkout (an editable install) records no hashes of its modules, so
there is nothing to compare with: it is reported as not checkable, not as
modified.
"""

import base64
import hashlib
from importlib.metadata import (
    Distribution,
    PackageNotFoundError,
    distribution,
    packages_distributions,
)
from pathlib import Path

PACKAGE = "arbiter"


def modified_files(installed: Distribution) -> list[str] | None:
    """The package's files whose content differs from the install's record (or
    that are gone), or None when the record holds no hash of them."""
    recorded = [
        entry
        for entry in installed.files or []
        if entry.hash is not None
        and entry.hash.mode == "sha256"
        and entry.parts[0] == PACKAGE
        and entry.suffix == ".py"  # compiled caches are not in the record's hashes
    ]
    if not recorded:
        return None
    changed = []
    for entry in recorded:
        assert entry.hash is not None
        try:
            content = Path(str(entry.locate())).read_bytes()
        except OSError:
            changed.append(str(entry))
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=")
        if digest.decode() != entry.hash.value:
            changed.append(str(entry))
    return changed


def installed_worker() -> Distribution | None:
    """The distribution this code came in: the server's worker package
    (`arbiter-worker`) or the whole project (`arbiter`)."""
    for name in packages_distributions().get(PACKAGE, []):
        try:
            return distribution(name)
        except PackageNotFoundError:
            continue
    return None


def check_installation() -> tuple[bool, str]:
    """(modified, what to log) for the running worker."""
    installed = installed_worker()
    changed = None if installed is None else modified_files(installed)
    if changed is None:
        return False, "worker files: a source checkout, not checked against an install record"
    if not changed:
        return False, "worker files: as installed"
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return True, f"worker files: modified since installed ({shown}); reported as modified"
