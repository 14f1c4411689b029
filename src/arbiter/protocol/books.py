"""Opening books on the wire: the `book_sri` a task carries and where books live.

`book_sri` is the bare base64 of the SHA-384 of the book's *text*: the
official Fishtest worker reads a book in text mode, so line endings are
translated (CRLF and CR become LF) before hashing, and it compares the result
with the value the server sent. The official-stockfish/books catalogue
(`books.json`) stores the same form. Computing it over the same translated
text is what lets either worker check either kind of book.
"""

import base64
import hashlib

# Arbiter's own book (arbiter/data/books), hosted by every Arbiter server.
SHIPPED_BOOK = "arbiter-openings-v1.epd"
# The repository the official worker downloads every book from, as `<name>.zip`.
CATALOGUE_BOOKS_URL = "https://raw.githubusercontent.com/official-stockfish/books/master"


class BookHasher:
    """Incremental `book_sri`: feed the file's bytes in chunks of any size.

    A CR at the end of one chunk and an LF at the start of the next are one
    line ending, so the chunk boundary remembers a trailing CR.
    """

    def __init__(self) -> None:
        self._sha384 = hashlib.sha384()
        self._after_cr = False

    def update(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the CR before it was already hashed as LF
        self._after_cr = chunk.endswith(b"\r")
        self._sha384.update(chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))

    def sri(self) -> str:
        return base64.b64encode(self._sha384.digest()).decode("ascii")


def book_sri(data: bytes) -> str:
    """The `book_sri` of a whole book held in memory."""
    hasher = BookHasher()
    hasher.update(data)
    return hasher.sri()
