"""What "fails the same way" means: a failure's signature, and how one is computed.

A signature is the kind of failure (compile error, runtime error, accuracy, crash, hang),
the innermost exception type, and a normalized message: paths, addresses and numbers are
masked so that a smaller graph with smaller inputs still counts as the same failure, while a
different error does not. This module never imports torch: the parent process compares
signatures that the worker and the verifier computed.
"""

from __future__ import annotations

import re
import signal as _signal
from dataclasses import asdict, dataclass
from typing import Any

COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
ACCURACY = "accuracy"
CRASH = "crash"
HANG = "hang"

KIND_TEXT = {
    COMPILE_ERROR: "compile error",
    RUNTIME_ERROR: "runtime error in compiled code",
    ACCURACY: "wrong results (compiled differs from eager)",
    CRASH: "crash",
    HANG: "hang",
}

# Accuracy failures carry their key in the exception text as "[accuracy:<key>]", so that the
# verifier can read it back from a repro's AssertionError.
ACCURACY_TAG = re.compile(r"\[accuracy:(?P<key>[a-z_:]+)\]")

_MAX_DETAIL = 400
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[^\s:'\"`,()\[\]]+)+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(?:\.\d+)?(?:e-?\d+)?")
_COMPILER_ERROR_LINE = re.compile(r"\berror:\s*(?P<text>.+)")
_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "`": "'"})


@dataclass(frozen=True)
class Signature:
    kind: str
    exc_type: str = ""
    key: str = ""
    detail: str = ""  # the original text, for people; not compared

    def same_as(self, other: Signature | None) -> bool:
        return other is not None and (self.kind, self.exc_type, self.key) == (other.kind, other.exc_type, other.key)

    def describe(self) -> str:
        head = KIND_TEXT.get(self.kind, self.kind)
        if self.kind == ACCURACY:
            return f"{head}: {self.detail or self.key}"
        if self.kind in (CRASH, HANG):
            return f"{head}: {self.detail or self.key}"
        first = self.detail.splitlines()[0] if self.detail else self.key
        return f"{head}: {self.exc_type}: {first}" if self.exc_type else f"{head}: {first}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Signature | None:
        if not data:
            return None
        return cls(str(data.get("kind", "")), str(data.get("exc_type", "")), str(data.get("key", "")),
                   str(data.get("detail", "")))


def innermost(exc: BaseException) -> BaseException:
    """The exception a backend wrapper carries: torch wraps a backend's error in
    BackendCompilerFailed / InductorError, each holding the original as ``inner_exception``."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None)
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


# A GPU kernel's fault is reported asynchronously: the same fault surfaces at a later kernel
# launch (Triton's launcher: "Triton Error [CUDA]: ...", Inductor's: "CUDA driver error: ...")
# or at a synchronization (torch: "CUDA error: ...", a RuntimeError or torch.AcceleratorError),
# whichever comes first, which depends on timing and on how many kernels follow the faulty one.
# Its signature is the fault itself, however it surfaced.
GPU_FAULT = "GPU fault"
_GPU_FAULTS = ("device-side assert triggered", "an illegal memory access was encountered",
               "unspecified launch failure", "an illegal instruction was encountered", "misaligned address")
# Words of errors after which a GPU context is unusable (CUDA's errors are sticky: every later
# call in the process fails the same way), torch's, Triton's and the HIP runtime's spelling.
_DEVICE_POISON = ("CUDA error", "device-side assert", "illegal memory access", "Triton Error [CUDA]",
                  "unspecified launch failure", "illegal instruction", "misaligned address",
                  "CUBLAS_STATUS_EXECUTION_FAILED", "HIP error", "hipError")
_DEVICE_ERROR_TYPES = (GPU_FAULT, "AcceleratorError")  # torch >= 2.8 raises CUDA errors as torch.AcceleratorError


def poisons_device(signature: Signature | None) -> bool:
    """Whether the failure left its GPU context unusable (the worker must not check again)."""
    return signature is not None and (signature.exc_type in _DEVICE_ERROR_TYPES
                                      or any(word in signature.detail for word in _DEVICE_POISON))


def from_exception(exc: BaseException, kind: str) -> Signature:
    if kind == ACCURACY or isinstance(exc, AssertionError) and ACCURACY_TAG.search(_text(exc)):
        return accuracy_signature(_text(exc))
    inner = innermost(exc)
    text = _text(inner)
    fault = next((f for f in _GPU_FAULTS if f in text), None)
    if fault is not None:
        return Signature(kind, GPU_FAULT, fault, text[:_MAX_DETAIL])
    return Signature(kind, type(inner).__name__, normalize_message(text), text[:_MAX_DETAIL])


def accuracy_signature(message: str) -> Signature:
    match = ACCURACY_TAG.search(message)
    key = match.group("key") if match else "forward:values"
    detail = ACCURACY_TAG.sub("", message).strip()
    return Signature(ACCURACY, "", key, detail[:_MAX_DETAIL])


def crash_signature(returncode: int) -> Signature:
    """A process that died of a signal (subprocess reports -N)."""
    if returncode < 0:
        try:
            name = _signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Signature(CRASH, "", name, f"the process died of {name}")
    return Signature(CRASH, "", f"exit {returncode}", f"the process exited with status {returncode}")


def hang_signature(seconds: float) -> Signature:
    return Signature(HANG, "", "timeout", f"no result after {seconds:.0f} s")


def normalize_message(text: str) -> str:
    """The part of a message that identifies the failure.

    Compiler output is reduced to its ``error:`` lines (a C++ compile error's first line is
    just "C++ compile error"); any other message to its first line. Paths, hex addresses
    and numbers are masked: they change with temp directories, and with graph and input sizes.
    """
    text = text.translate(_QUOTES)
    errors = sorted({_mask(m.group("text")) for m in _COMPILER_ERROR_LINE.finditer(text)})
    if errors:
        return " | ".join(errors)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _mask(lines[0]) if lines else ""


def _mask(text: str) -> str:
    text = _PATH.sub("<path>", text)
    text = _HEX.sub("<addr>", text)
    text = _NUMBER.sub("N", text)
    return re.sub(r"\s+", " ", text).strip()


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"
