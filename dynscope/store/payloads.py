"""Read one payload back, bounded: a capture may come from a stranger.

A payload is checked against what its row declares before it is trusted: the bytes it
inflates to never exceed the declared size (a zlib bomb stops there, not at 1.5 GB), the
real size equals the declared one, and the content hash equals the row's key. Only the
first ``limit`` bytes are read: a payload declared longer is inflated that far and no
further, so a view's time and memory never grow with a payload's size (a view that needs
a payload's first line does not pay for its gigabyte). Its hash, which only a whole read
can check, is not checked then: the hash guards against damage, not against an attacker,
who can always write a matching one.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from dynscope.errors import CaptureError

# What one view keeps of one payload; the rest is cut with a note that says so.
DEFAULT_LIMIT = 32 * 1024 * 1024
_CHUNK = 1 << 20
# zlib never grows incompressible data by more than ~0.03% plus a few bytes.
_ZLIB_SLACK = 1024


@dataclass(frozen=True)
class Payload:
    text: str
    size: int          # the whole payload's bytes, as declared and checked
    truncated: bool    # text holds only the first `limit` bytes


def truncation_note(kept: int, size: int) -> str:
    return f"… truncated at {_mb(kept)} of {_mb(size)}"


def decode(digest: str, codec: str, size: int, chunks: Iterator[bytes], stored_bytes: int,
           limit: int = DEFAULT_LIMIT) -> Payload:
    """Inflate and check one blob row; raise CaptureError if it is not what it claims."""
    short = digest[:12]
    if not isinstance(size, int) or size < 0:
        raise _corrupt(short, f"its declared size {size!r} is not a size")
    if codec == "raw":
        if stored_bytes != size:
            raise _corrupt(short, f"it declares {size} bytes but holds {stored_bytes}")
        plain = chunks
    elif codec == "zlib":
        if stored_bytes > size + size // 1000 + _ZLIB_SLACK:
            raise _corrupt(short, f"{stored_bytes} compressed bytes cannot inflate to the declared {size}")
        plain = _inflate(short, chunks, size)
    else:
        raise _corrupt(short, f"unknown codec {codec!r}")

    if size > limit:
        return Payload(_head(short, plain, limit), size, truncated=True)
    hasher = hashlib.blake2b(digest_size=16)
    kept = bytearray()
    for piece in plain:
        if len(kept) + len(piece) > size:
            raise _corrupt(short, f"it holds more than its declared {size} bytes")
        hasher.update(piece)
        kept += piece
    if len(kept) != size:
        raise _corrupt(short, f"it declares {size} bytes but holds {len(kept)}")
    if hasher.hexdigest() != digest:
        raise _corrupt(short, "its content does not match its hash")
    return Payload(kept.decode("utf-8", "replace"), size, truncated=False)


def _head(short: str, plain: Iterator[bytes], limit: int) -> str:
    """The first ``limit`` bytes of a payload declared longer; what follows is never read."""
    kept = bytearray()
    for piece in plain:
        kept += piece[: limit - len(kept)]
        if len(kept) >= limit:
            break
    else:
        raise _corrupt(short, f"it holds {len(kept)} bytes, fewer than it declares")
    return kept.decode("utf-8", "replace")


def _inflate(short: str, chunks: Iterator[bytes], size: int) -> Iterator[bytes]:
    inflater = zlib.decompressobj()
    produced = 0
    try:
        for compressed in chunks:
            data = compressed
            while data:
                # Never ask for more than one byte past the declared size: a bomb stops here.
                want = min(_CHUNK, size + 1 - produced)
                out = inflater.decompress(data, max(want, 1))
                produced += len(out)
                yield out
                if produced > size:
                    return
                data = inflater.unconsumed_tail
        # All input is consumed; what zlib still buffers is at most its window (32 KB).
        yield inflater.flush()
    except zlib.error as e:
        raise _corrupt(short, f"it does not inflate ({e})") from None


def _corrupt(short: str, why: str) -> CaptureError:
    return CaptureError(f"payload {short} is corrupt: {why}; the capture was damaged or tampered with")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n:,} bytes"
