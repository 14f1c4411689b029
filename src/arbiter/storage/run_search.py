"""Full-text search of runs: the database's own text index over each run's words.

A run's words are its owner's name, its branches and its description
(`run_words`), cut into tokens here, in Python, so that both backends index
and query the very same tokens: letters and digits, case-folded
("fix-nnue_v2" is "fix nnue v2"). SQLite indexes them with FTS5 (an
external-content table kept by triggers), PostgreSQL with a GIN index on
`to_tsvector('simple', words)`. A query matches runs holding a token that
starts with each of its tokens, newest submission first (`seq`), so a common
word costs what a rare one does: the index is read in order until a page
is full.

A prefix is first expanded into the whole terms it stands for (`run_terms`,
every token ever indexed): both indexes read a few whole terms' lists lazily,
in order, where a prefix makes them gather and merge every matching list
first (12 ms against 1 ms for three common words on 250,000 runs). A prefix of
no stored term, or of too many, is left to the index.

The run store keeps `run_words` and `run_terms` as it keeps any index of its
rows: on add, and when a run's description changes.
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnClause,
    ColumnElement,
    Connection,
    FromClause,
    column,
    delete,
    func,
    literal_column,
    select,
    table,
    update,
)

from arbiter.storage.run_spec import RunSpec
from arbiter.storage.schema import run_terms, run_words
from arbiter.storage.sql_common import insert_missing

MAX_TOKENS = 8  # tokens of a query used; more only slow it down
MAX_EXPANSIONS = 16  # whole terms a prefix is expanded into; beyond, the index's prefix search
_TOKEN = re.compile(r"[^\W_]+")
_FTS = table("run_words_fts", column("rowid"), column("words"))

# Created by the migration that adds run_words (and nowhere else): SQLAlchemy's
# metadata cannot describe either backend's text index.
SQLITE_DDL = (
    "CREATE VIRTUAL TABLE run_words_fts USING fts5(words, content='run_words', "
    "content_rowid='seq', tokenize='unicode61 remove_diacritics 0', prefix='2 3')",
    "CREATE TRIGGER run_words_ai AFTER INSERT ON run_words BEGIN "
    "INSERT INTO run_words_fts(rowid, words) VALUES (new.seq, new.words); END",
    "CREATE TRIGGER run_words_ad AFTER DELETE ON run_words BEGIN "
    "INSERT INTO run_words_fts(run_words_fts, rowid, words) "
    "VALUES ('delete', old.seq, old.words); END",
    "CREATE TRIGGER run_words_au AFTER UPDATE ON run_words BEGIN "
    "INSERT INTO run_words_fts(run_words_fts, rowid, words) "
    "VALUES ('delete', old.seq, old.words); "
    "INSERT INTO run_words_fts(rowid, words) VALUES (new.seq, new.words); END",
)
SQLITE_DROP = (
    "DROP TRIGGER IF EXISTS run_words_au",
    "DROP TRIGGER IF EXISTS run_words_ad",
    "DROP TRIGGER IF EXISTS run_words_ai",
    "DROP TABLE IF EXISTS run_words_fts",
)
# The document is stored (a generated column): a plan that walks run_words in
# order checks each row's document without parsing its words again.
POSTGRESQL_DDL = (
    "ALTER TABLE run_words ADD COLUMN fts_document tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, words)) STORED",
    "CREATE INDEX ix_run_words_fts_document ON run_words USING gin (fts_document)",
)
POSTGRESQL_DROP = (
    "DROP INDEX IF EXISTS ix_run_words_fts_document",
    "ALTER TABLE run_words DROP COLUMN IF EXISTS fts_document",
)
# Objects of the text index that the declared schema leaves out (tests compare them).
UNDECLARED = frozenset({"run_words_fts", "fts_document", "ix_run_words_fts_document"})
# A PostgreSQL search with fewer matches than this sorts them all (read through
# the text index); with more, it reads run_words newest first until a page is
# full. Its planner cannot tell the two apart for words that appear together.
FEW_MATCHES = 5_000
_DOCUMENT: ColumnClause[Any] = column("fts_document")


@dataclass(frozen=True)
class _Syntax:
    """How a backend's query language writes a whole term, a prefix, "either"
    and "both"."""

    whole: str
    prefix: str
    either: str
    both: str


_FTS5 = _Syntax(whole='"{}"', prefix='"{}"*', either=" OR ", both=" AND ")
_TSQUERY = _Syntax(whole="{}", prefix="{}:*", either=" | ", both=" & ")
_LAST_CHARACTER = chr(0x10FFFF)  # after any character a term may hold next


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def words_of(username: str, spec: RunSpec) -> str:
    """The text a run is found by: owner, branches, description."""
    parts = (username, spec.new_tag, spec.base_tag, spec.info)
    return " ".join(tokens(" ".join(parts)))


def add(connection: Connection, rows: Sequence[tuple[str, str, RunSpec]]) -> None:
    """Index runs given as (run id, owner, spec), in the order given; a run
    indexed already keeps its row (an import run again)."""
    add_terms(connection, add_words(connection, rows))


def add_words(connection: Connection, rows: Sequence[tuple[str, str, RunSpec]]) -> list[str]:
    """`add` without the terms (the schema of revision 0011 has no run_terms);
    returns the words indexed."""
    values = [{"run_id": i, "words": words_of(owner, spec)} for i, owner, spec in rows]
    insert_missing(connection, run_words, values)
    return [value["words"] for value in values]


def add_terms(connection: Connection, texts: Iterable[str]) -> None:
    terms = sorted({term for text in texts for term in text.split()})
    insert_missing(connection, run_terms, [{"term": term} for term in terms])


def replace(connection: Connection, run_id: str, username: str, spec: RunSpec) -> None:
    words = words_of(username, spec)
    connection.execute(update(run_words).where(run_words.c.run_id == run_id).values(words=words))
    add_terms(connection, [words])


def remove_all(connection: Connection) -> None:
    connection.execute(delete(run_words))


def matches(
    connection: Connection, text: str
) -> tuple[FromClause, ColumnElement[bool], ColumnElement[Any]] | None:
    """(run_words joined to its text index, the condition that every token of
    `text` matches, the order key: newest submission first), or None when
    `text` has no token. Join on `run_words.c.run_id`."""
    found = tokens(text)[:MAX_TOKENS]
    if not found:
        return None
    expansions = [_expanded(connection, token) for token in found]
    if connection.dialect.name == "postgresql":
        return _postgresql_matches(connection, _query(found, expansions, _TSQUERY))
    query = _query(found, expansions, _FTS5)
    joined = _FTS.join(run_words, run_words.c.seq == _FTS.c.rowid)
    # Ordered by the text index's own rowid, which FTS5 walks in order.
    return joined, _FTS.c.words.match(query), _FTS.c.rowid


def _expanded(connection: Connection, token: str) -> tuple[str, ...] | None:
    """The whole terms `token` starts, or None when there are none or more than
    MAX_EXPANSIONS: the index's own prefix search then."""
    statement = (
        select(run_terms.c.term)
        .where(run_terms.c.term >= token, run_terms.c.term < token + _LAST_CHARACTER)
        .order_by(run_terms.c.term)
        .limit(MAX_EXPANSIONS + 1)
    )
    terms = tuple(connection.execute(statement).scalars())
    return terms if 0 < len(terms) <= MAX_EXPANSIONS else None


def _query(found: list[str], expansions: list[tuple[str, ...] | None], syntax: _Syntax) -> str:
    """Every token as the choice of its whole terms, or as a prefix. Tokens are
    letters and digits: neither syntax needs more quoting than its format's."""
    parts = []
    for token, terms in zip(found, expansions, strict=True):
        if terms is None:
            parts.append(syntax.prefix.format(token))
        else:
            parts.append("(" + syntax.either.join(syntax.whole.format(t) for t in terms) + ")")
    return syntax.both.join(parts)


def _postgresql_matches(
    connection: Connection, query: str
) -> tuple[FromClause, ColumnElement[bool], ColumnElement[Any]]:
    simple: ColumnElement[Any] = literal_column("'simple'::regconfig")
    condition = _DOCUMENT.op("@@")(func.to_tsquery(simple, query))
    probe = select(run_words.c.seq).where(condition).limit(FEW_MATCHES).subquery()
    count = connection.execute(select(func.count()).select_from(probe)).scalar_one()
    # `seq + 0` is no column: ordering by it, PostgreSQL reads the matches through
    # the text index and sorts them, instead of walking the whole table in order.
    key = run_words.c.seq + 0 if count < FEW_MATCHES else run_words.c.seq
    return run_words, condition, key
