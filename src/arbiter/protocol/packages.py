"""What the server signs when it publishes its worker package, and the
worker checks before it installs one: one text naming every fact of the
package the worker acts on, so a signature over it vouches for all of them.

The key is Ed25519 (32 raw bytes, sent as standard base64). The signing and
the checking are the server's and the worker's (they need `cryptography`);
this module only says what is signed, so both sides build it alike.
"""

import base64
import binascii

SIGNED_CONTEXT = "arbiter worker package, signature version 1"
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64


def package_statement(filename: str, version: str, protocol: int, sha256: str, size: int) -> bytes:
    """The bytes signed for a package: its context line, then one fact a line."""
    facts = (SIGNED_CONTEXT, filename, version, str(protocol), sha256, str(size))
    return ("\n".join(facts) + "\n").encode("utf-8")


def encode_key(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def decode_key(text: str, length: int) -> bytes | None:
    """The raw bytes of a base64 key or signature of `length` bytes, else None."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == length else None


def key_fingerprint(public_key: str) -> str:
    """A short name for a key in logs and messages: its first 16 base64 characters."""
    return public_key.strip()[:16]
