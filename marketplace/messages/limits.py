"""How much a frame may expand when decoded: a structural scan of large frames before decoding.

msgpack is compact: an empty array is one byte, and Python makes a 56-byte list of it. A 63 MiB
frame made of nested empty arrays decodes to about 4 GB and takes tens of seconds. Every frame of
this protocol carries its bulk in ``bin`` payloads (arrays travel as raw bytes), so its *structure*
is small: a few dozen maps, strings and numbers, or a few thousand for a message that lists every
owner. :func:`check_structure` walks the msgpack tokens of a frame without building anything,
skipping ``bin`` and ``str`` payloads by their length, and refuses the frame when it holds more
than ``max_tokens`` objects, nests deeper than ``max_depth``, or declares more elements than bytes
remain. A frame it passes decodes to at most about 64 bytes per token plus its payloads, so a party
holding it needs about twice the frame's size.

Frames of at most :data:`SCAN_ABOVE` bytes are decoded without a scan: they cannot expand past a
few MiB, and msgpack's own limits (array, map, string lengths, nesting) still apply.
"""

from __future__ import annotations

__all__ = ["MAX_ARRAY_LEN", "MAX_DEPTH", "MAX_MAP_LEN", "MAX_TOKENS", "SCAN_ABOVE", "check_structure"]

SCAN_ABOVE = 64 * 1024
MAX_TOKENS = 1 << 18
MAX_DEPTH = 32
MAX_ARRAY_LEN = 1 << 20
"""The most items any one msgpack array of a frame may hold (a list field with no tighter bound)."""
MAX_MAP_LEN = 1 << 16
"""The most entries any one msgpack map of a frame may hold (a mapping field with no tighter bound)."""

# first byte -> (header bytes after the first, payload-length bytes, fixed payload bytes)
_FIXED = {
    0xC0: 0,
    0xC2: 0,
    0xC3: 0,
    0xCA: 4,
    0xCB: 8,
    0xCC: 1,
    0xCD: 2,
    0xCE: 4,
    0xCF: 8,
    0xD0: 1,
    0xD1: 2,
    0xD2: 4,
    0xD3: 8,
    0xD4: 2,
    0xD5: 3,
    0xD6: 5,
    0xD7: 9,
    0xD8: 17,
}
_SIZED = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}  # bin and str: length bytes
_EXT = {0xC7: 1, 0xC8: 2, 0xC9: 4}  # ext: length bytes, then a type byte
_ARRAY = {0xDC: 2, 0xDD: 4}
_MAP = {0xDE: 2, 0xDF: 4}


def check_structure(
    frame: bytes | memoryview, *, max_tokens: int = MAX_TOKENS, max_depth: int = MAX_DEPTH
) -> str | None:
    """None when ``frame`` is one msgpack object within the limits; otherwise why it is not (a short
    text for the error reply). Runs in time proportional to its tokens, at most ``max_tokens``."""
    data = memoryview(frame)
    size = len(data)
    i = 0
    tokens = 0
    stack = [1]  # objects still to read at each open level; the root is one object
    while stack:
        if stack[-1] == 0:
            stack.pop()
            continue
        stack[-1] -= 1
        if i >= size:
            return "a truncated msgpack object"
        tokens += 1
        if tokens > max_tokens:
            return f"more than {max_tokens} msgpack objects (a frame's structure is small; its bulk travels as bytes)"
        b = data[i]
        i += 1
        if b <= 0x7F or b >= 0xE0:
            continue
        n = -1  # children of a container
        if b <= 0x8F:
            n = 2 * (b & 0x0F)
        elif b <= 0x9F:
            n = b & 0x0F
        elif b <= 0xBF:
            i += b & 0x1F
        else:
            header = _header(b, data, i)
            if header is None:
                return f"the byte 0x{b:02x} at offset {i - 1}, which starts no msgpack object"
            i, n = header
        if n > 0:
            if n > size - i:
                return f"a container that declares {n} elements with {max(size - i, 0)} bytes left"
            if len(stack) > max_depth:
                return f"containers nested deeper than {max_depth}"
            stack.append(n)
    return _ending(i, size)


def _header(b: int, data: memoryview, i: int) -> tuple[int, int] | None:
    """The rest of the header of an object whose first byte ``b`` (0xC0 to 0xDF) is not one of the
    fix* kinds, read at offset ``i`` (just past ``b``): the offset past what can be skipped of it
    (its header, and the payload of a number, a ``bin``, a ``str`` or an ``ext``) and how many
    children it declares (-1 for none: only arrays and maps have them). None when ``b`` starts no
    msgpack object. Kept out of :func:`check_structure`'s loop, which handles the one-byte kinds
    (the most frequent) inline."""
    if b in _FIXED:
        return i + _FIXED[b], -1
    if b in _SIZED:
        width = _SIZED[b]
        return i + width + int.from_bytes(data[i : i + width], "big"), -1
    if b in _EXT:
        width = _EXT[b]
        return i + width + 1 + int.from_bytes(data[i : i + width], "big"), -1
    if b in _ARRAY:
        width = _ARRAY[b]
        return i + width, int.from_bytes(data[i : i + width], "big")
    if b in _MAP:
        width = _MAP[b]
        return i + width, 2 * int.from_bytes(data[i : i + width], "big")
    return None


def _ending(i: int, size: int) -> str | None:
    """Once the root object is read, ending at offset ``i`` of a ``size``-byte frame: None when it
    ends the frame exactly; otherwise why not (a payload running past the end, or bytes left over)."""
    if i > size:
        return "a truncated msgpack object"
    if i < size:
        return f"{size - i} bytes after the msgpack object"
    return None
