"""Whether a worker package from the server may be installed.

Two checks, both before anything is downloaded or installed:

- the transport: https, or a server on this machine (a loopback address),
  unless the owner sets `allow_http_updates` in worker.ini: plain http across
  a network lets anyone on the path answer in the server's place;
- the signature: the package's description (protocol/packages.py) must be
  signed with the server's Ed25519 key. The key is the one set as
  `server_key` in worker.ini (`--server-key`, from the operator's `arbiter
  signing-key`), or else the one the server announced the first time this
  worker asked, pinned in the data directory from then on. A package that is
  unsigned, signed with another key, or whose signature does not verify is
  refused, and the running worker carries on.
"""

import ipaddress
import logging
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from arbiter.protocol.packages import (
    PUBLIC_KEY_BYTES,
    SIGNATURE_BYTES,
    decode_key,
    key_fingerprint,
)
from arbiter.worker.errors import UpdateError

log = logging.getLogger("arbiter.worker.update")

PIN_FILE = "server-signing-key"  # in the data directory: the key pinned on first sight


@dataclass(frozen=True, slots=True)
class UpdateTrust:
    server_key: str = ""  # set by the owner; "": pin the first key announced
    allow_http: bool = False  # plain http to a server on another machine


def check_transport(server: str, trust: UpdateTrust) -> None:
    """UpdateError unless updates from `server` travel where no one can alter them."""
    parts = urlsplit(server)
    if parts.scheme == "https" or trust.allow_http or _on_this_machine(parts.hostname or ""):
        return
    raise UpdateError(
        f"the server is reached over plain {parts.scheme or 'http'}, where anyone on the path"
        " could send another package: use its https address, or set allow_http_updates = true"
        " in worker.ini (--allow-http-updates) to update over http all the same"
    )


def _on_this_machine(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class PinnedKey:
    """The server key this worker trusts: the owner's, or the first one announced."""

    def __init__(self, data_dir: Path, trust: UpdateTrust) -> None:
        self.path = data_dir / PIN_FILE
        self.explicit = trust.server_key.strip()

    def get(self) -> str | None:
        if self.explicit:
            return self.explicit
        try:
            pinned = self.path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return pinned if decode_key(pinned, PUBLIC_KEY_BYTES) is not None else None

    def pin(self, announced: str) -> str:
        """Trust `announced` from now on (when nothing is trusted yet); the key trusted."""
        trusted = self.get()
        if trusted is not None:
            return trusted
        if decode_key(announced, PUBLIC_KEY_BYTES) is None:
            raise UpdateError(
                "the server announces no package signing key: its packages are unsigned"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(f".{PIN_FILE}.tmp")
        staging.write_text(announced.strip() + "\n", encoding="ascii")
        staging.replace(self.path)
        log.info("pinned the server's package signing key %s", key_fingerprint(announced))
        return announced.strip()


def verify(statement: bytes, public_key: str, signature: str, trusted_key: str) -> None:
    """UpdateError unless `statement` (a package's, protocol/packages.py) is
    signed, as `public_key` and `signature` say, with `trusted_key`."""
    if not signature:
        raise UpdateError("the server's worker package is not signed: refused")
    if public_key.strip() != trusted_key:
        raise UpdateError(
            f"the package is signed with key {key_fingerprint(public_key)}, and this worker"
            f" trusts {key_fingerprint(trusted_key)}: refused. If the server's operator changed"
            f" the key, set server_key in worker.ini (or delete {PIN_FILE} in the data directory)"
        )
    key = decode_key(trusted_key, PUBLIC_KEY_BYTES)
    raw_signature = decode_key(signature, SIGNATURE_BYTES)
    if key is None or raw_signature is None or not _verifies(key, raw_signature, statement):
        raise UpdateError("the package's signature does not verify: refused")


def _verifies(key: bytes, signature: bytes, statement: bytes) -> bool:
    # Imported here: only an update needs it, and the worker starts without it.
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(key).verify(signature, statement)
    except InvalidSignature:
        return False
    return True
