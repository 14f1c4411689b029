"""A run's specification (`RunSpec`): what was submitted, what was resolved
from it, and the stop rule's state, as typed fields.

The database and the wire keep the reference's shape, one JSON object
(`args`): `spec_of` reads such an object and `spec_document` writes one. A key
Arbiter does not know (a Fishtest dump carries some) is kept in `extra` and
written back as it came, so nothing an import brought is lost.
"""

from typing import Any

import msgspec

from arbiter.stats.sprt import SprtState
from arbiter.stats.spsa import SpsaState


class RunSpec(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The defaults are what a run meant when a field did not exist yet, so an
    older stored run reads as it ran. Untracked by the collector, as
    `RunRecord` (which holds one) says why."""

    base_tag: str = ""
    new_tag: str = ""
    base_nets: list[str] = []
    new_nets: list[str] = []
    num_games: int = 0
    tc: str = ""
    new_tc: str = ""  # "" reads as `tc` (spec_of)
    book: str = ""
    book_depth: int = 8  # text in the reference's documents (spec_of, spec_document)
    threads: int = 1
    resolved_base: str = ""
    resolved_new: str = ""
    msg_base: str = ""
    msg_new: str = ""
    base_options: str = ""
    new_options: str = ""
    info: str = ""
    base_signature: str = ""
    new_signature: str = ""
    username: str = ""
    tests_repo: str = ""
    auto_purge: bool = False
    throughput: float = 100.0
    itp: float = 100.0  # the internal throughput, set by the ranking
    priority: float = 0.0
    adjudication: bool = True
    arch_filter: str = ""
    compiler: str = ""
    # Arbiter's own: the worker archs the arch filter matched (None: no filter).
    allowed_archs: list[str] | None = None
    sprt: SprtState | None = None
    spsa: SpsaState | None = None
    extra: dict[str, Any] = {}  # keys of a stored document that are not fields


_FIELDS = frozenset(RunSpec.__struct_fields__) - {"extra"}
_STOP_RULES = ("sprt", "spsa")  # absent from a document without them, as in the reference


def spec_of(document: dict[str, Any]) -> RunSpec:
    """The spec of a stored `args` object. The values are taken as they are:
    what Arbiter writes is typed by construction, and the importer checks what
    a dump brings (`checked_spec`)."""
    known = {key: value for key, value in document.items() if key in _FIELDS}
    if len(known) < len(document):
        known["extra"] = {k: v for k, v in document.items() if k not in _FIELDS}
    if not known.get("new_tc"):
        known["new_tc"] = known.get("tc", "")
    depth = known.get("book_depth")
    if isinstance(depth, str) and depth.isdecimal():
        known["book_depth"] = int(depth)
    return RunSpec(**known)


def checked_spec(document: dict[str, Any]) -> RunSpec:
    """`spec_of` with every field's type checked and a number or flag written as
    text read as one; msgspec.ValidationError names the first bad field. The stop
    rules are checked too but kept as they came, with any keys of their own."""
    spec = spec_of(document)
    fields = msgspec.structs.asdict(spec)
    checked = msgspec.convert(fields, RunSpec, strict=False)
    return msgspec.structs.replace(checked, sprt=spec.sprt, spsa=spec.spsa)


def spec_document(spec: RunSpec) -> dict[str, Any]:
    """The `args` object of a spec: its fields, then its extra keys; a stop
    rule the run does not have is left out."""
    document = msgspec.structs.asdict(spec)
    del document["extra"]
    document["book_depth"] = str(spec.book_depth)
    for rule in _STOP_RULES:
        if document[rule] is None:
            del document[rule]
    if spec.extra:
        document.update(spec.extra)
    return document
