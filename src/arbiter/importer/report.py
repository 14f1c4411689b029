"""What an import did, per collection: imported, skipped (with reasons), notes."""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

EXAMPLES_PER_REASON = 3


@dataclass(slots=True)
class CollectionReport:
    name: str
    documents: int = 0  # read from the file
    imported: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)  # ids of skipped documents
    notes: Counter[str] = field(default_factory=Counter)  # imported, with something filled
    offset: int = 0  # uncompressed bytes of the file done
    complete: bool = False
    error: str | None = None  # the file stops being readable here

    def skip(self, reason: str, example: str | None) -> None:
        self.skipped[reason] += 1
        if example is not None:
            shown = self.examples.setdefault(reason, [])
            if len(shown) < EXAMPLES_PER_REASON:
                shown.append(example)

    def to_marker(self) -> dict[str, Any]:
        """The progress marker kept in the kv table with every batch."""
        return {
            "documents": self.documents,
            "imported": self.imported,
            "skipped": dict(self.skipped),
            "examples": self.examples,
            "notes": dict(self.notes),
            "offset": self.offset,
            "complete": self.complete,
            "error": self.error,
        }

    @classmethod
    def from_marker(cls, name: str, marker: dict[str, Any]) -> "CollectionReport":
        return cls(
            name=name,
            documents=int(marker["documents"]),
            imported=int(marker["imported"]),
            skipped=Counter(marker["skipped"]),
            examples={k: list(v) for k, v in marker["examples"].items()},
            notes=Counter(marker["notes"]),
            offset=int(marker["offset"]),
            complete=bool(marker["complete"]),
            error=marker["error"],
        )

    def lines(self) -> list[str]:
        skipped = sum(self.skipped.values())
        head = f"{self.name}: {self.imported:,} imported, {skipped:,} skipped"
        if self.error:
            head += f"; stopped: {self.error}"
        lines = [head]
        for reason, count in self.skipped.most_common():
            examples = self.examples.get(reason)
            shown = f" (e.g. {', '.join(examples)})" if examples else ""
            lines.append(f"  skipped {count:,}: {reason}{shown}")
        lines += [f"  note {count:,}: {note}" for note, count in self.notes.most_common()]
        return lines


@dataclass(slots=True)
class ImportReport:
    collections: list[CollectionReport] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)  # collection -> why
    resumed: bool = False

    def lines(self) -> list[str]:
        lines = ["import from Fishtest" + (" (continued)" if self.resumed else "") + ":"]
        for collection in self.collections:
            lines += collection.lines()
        lines += [f"{name}: not imported ({why})" for name, why in sorted(self.ignored.items())]
        return lines
