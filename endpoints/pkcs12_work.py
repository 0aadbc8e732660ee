"""How much key derivation opening a PKCS#12 file would cost, read before it
is opened (pure, no Django).

A PKCS#12 file names its own iteration counts: one for its MAC and one per
encrypted bag (PBKDF2 or the PKCS#12 KDF). Opening a file that asks for
billions of iterations, or for thousands of bags of a million each, holds a
web worker for minutes: a tenant's upload must not do that. Every count sits
in the same shape, a SEQUENCE holding a salt (OCTET STRING) followed at once
by the count (INTEGER): PBKDF2-params, pkcs-12PbeParams and MacData. So the
file is walked as BER (DER, and the indefinite lengths some exporters
write), into nested structures and into OCTET STRINGs that hold encoded
content, and each such count is summed. Certificates inside are never in
that shape (a serial number follows no OCTET STRING).
"""

from __future__ import annotations

# What one upload may ask for in all: OpenSSL writes 2,048 per use, Java
# 10,000, a cautious exporter 600,000 for its key (OWASP's PBKDF2 figure).
MAX_TOTAL_ITERATIONS = 2_000_000
MAX_DEPTH = 24  # nesting of a real file is about 12
MAX_NODES = 20_000  # elements walked in all

_SEQUENCE = 0x30
_OCTET_STRING = 0x04
_CONSTRUCTED_OCTET_STRING = 0x24
_INTEGER = 0x02


class Unreadable(ValueError):
    """Not BER the walk can follow (the file is refused as unreadable)."""


class TooComplex(Unreadable):
    """Nested deeper, or more elements, than a PKCS#12 file has: refused
    wherever it is, even inside bytes only tried as structure (else a file
    could hide its counts behind a structure the walk gives up on)."""


def total_iterations(data: bytes) -> int:
    """The iteration counts the file asks for, summed; Unreadable when its
    outer structure is not BER."""
    budget = [MAX_NODES]
    elements, end = _elements(data, 0, len(data), depth=0, budget=budget)
    if end != len(data):
        raise Unreadable("trailing bytes after the file's structure")
    return _walk(data, elements, depth=0, budget=budget)


def _walk(data: bytes, elements, *, depth: int, budget: list[int]) -> int:
    total = 0
    previous_tag = None
    for tag, start, end in elements:
        if tag == _INTEGER and previous_tag == _OCTET_STRING:
            total += int.from_bytes(data[start:end], "big", signed=True)
        if tag & 0x20:  # constructed: SEQUENCE, SET, [n] EXPLICIT, ...
            inner, stop = _elements(data, start, end, depth=depth + 1, budget=budget)
            if stop != end:  # an end-of-contents inside a definite length
                raise Unreadable("malformed content")
            total += _walk(data, inner, depth=depth + 1, budget=budget)
        elif tag == _OCTET_STRING and end > start:
            total += _inside(data, start, end, depth=depth + 1, budget=budget)
        previous_tag = _OCTET_STRING if tag == _CONSTRUCTED_OCTET_STRING else tag
        if total > MAX_TOTAL_ITERATIONS:
            return total  # enough to refuse: walk no further
    return total


def _inside(data: bytes, start: int, end: int, *, depth: int, budget: list[int]) -> int:
    """The counts in an OCTET STRING's content when it is encoded structure
    (a ContentInfo's data, a bag); 0 when it is plain bytes (a salt, a
    digest, ciphertext), which may happen to begin like structure but does
    not parse as such to its end (OpenSSL would not read it as any either)."""
    try:
        inner, stop = _elements(data, start, end, depth=depth, budget=budget)
        if stop != end:
            return 0
        return _walk(data, inner, depth=depth, budget=budget)
    except TooComplex:
        raise
    except Unreadable:
        return 0


def _elements(
    data: bytes, pos: int, end: int, *, depth: int, budget: list[int]
) -> tuple[list[tuple[int, int, int]], int]:
    """(tag, content start, content end) of each element from pos to end,
    and where they stopped: end, or just past an end-of-contents (00 00),
    which closes an indefinite-length parent's children."""
    found, stop, _ = _read(data, pos, end, depth=depth, budget=budget)
    return found, stop


def _read(
    data: bytes, pos: int, end: int, *, depth: int, budget: list[int]
) -> tuple[list[tuple[int, int, int]], int, bool]:
    """_elements, and whether an end-of-contents closed them."""
    if depth > MAX_DEPTH:
        raise TooComplex("nested too deep")
    found = []
    while pos < end:
        if data[pos] == 0 and pos + 1 < end and data[pos + 1] == 0:
            return found, pos + 2, True
        budget[0] -= 1
        if budget[0] < 0:
            raise TooComplex("too many elements")
        tag = data[pos]
        if tag & 0x1F == 0x1F:
            raise Unreadable("high tag numbers are not used by PKCS#12")
        if pos + 1 >= end:
            raise Unreadable("cut short")
        first = data[pos + 1]
        pos += 2
        if first == 0x80:  # indefinite: constructed only, children to EOC
            if not tag & 0x20:
                raise Unreadable("indefinite length on a primitive")
            _, after, closed = _read(data, pos, end, depth=depth + 1, budget=budget)
            if not closed:
                raise Unreadable("an indefinite length without its end")
            found.append((tag, pos, after - 2))
            pos = after
            continue
        if first & 0x80:
            count = first & 0x7F
            if count > 4 or pos + count > end:
                raise Unreadable("length out of range")
            length = int.from_bytes(data[pos : pos + count], "big")
            pos += count
        else:
            length = first
        if pos + length > end:
            raise Unreadable("cut short")
        found.append((tag, pos, pos + length))
        pos += length
    return found, pos, False
