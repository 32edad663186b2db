"""The helpers a repro script carries verbatim: inputs, running with gradients, accuracy.

These functions use nothing but torch, because minifier/repro.py copies their source into
every repro.py: the code that found a failure in a check is the code that proves it in a
fresh process.

Accuracy: compiled and eager code legitimately round differently, so a difference alone is
not a bug. Like torch's own accuracy minifier, a compiled output fails only when it is
further from a float64 computation than eager is (by more than a tolerance), or when it has
NaN/Inf where eager has none.
"""

from __future__ import annotations

import torch


def tensors_in(value):
    """The tensors in a (nested) output, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(item)]
    return []


def accuracy_problem(expected, actual, reference, rtol, atol, what="output"):
    """Why ``actual`` (compiled) is wrong compared with ``expected`` (eager), or None.
    ``reference`` is eager in float64 (None where it could not be computed). The text ends
    with a tag "[accuracy:<what>:<kind>]" naming the kind of failure."""
    expected, actual = tensors_in(expected), tensors_in(actual)
    references = tensors_in(reference) if reference is not None else [None] * len(expected)
    if len(expected) != len(actual):
        return f"compiled code returned {len(actual)} tensors, eager {len(expected)} [accuracy:{what}:structure]"
    for i, (want, got, ref) in enumerate(zip(expected, actual, references)):
        if want.shape != got.shape:
            return (f"{what} {i}: compiled shape {tuple(got.shape)}, eager {tuple(want.shape)} "
                    f"[accuracy:{what}:structure]")
        want, got = want.detach(), got.detach()
        if not (want.is_floating_point() or want.is_complex()):
            if not torch.equal(want.cpu(), got.cpu()):
                return f"{what} {i}: compiled integer values differ from eager [accuracy:{what}:values]"
            continue
        if (torch.isfinite(got) != torch.isfinite(want)).any():
            return (f"{what} {i}: compiled has {int((~torch.isfinite(got)).sum())} NaN/Inf values where eager "
                    f"has {int((~torch.isfinite(want)).sum())} [accuracy:{what}:nonfinite]")
        if torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            continue
        got64, want64 = got.to(torch.float64), want.to(torch.float64)
        error = (got64 - want64).abs().max().item()
        if ref is not None and ref.shape == want.shape:
            ref = ref.detach().to(torch.float64)
            finite = torch.isfinite(ref)
            compiled_error = (got64 - ref)[finite].abs().max().item() if finite.any() else 0.0
            eager_error = (want64 - ref)[finite].abs().max().item() if finite.any() else 0.0
            # Eager itself is this far from float64: compiled may be as far, and a little more.
            if compiled_error <= 2.0 * eager_error + atol:
                continue
            return (f"{what} {i}: compiled differs from eager by up to {error:.4g} (float64 reference: compiled "
                    f"off by {compiled_error:.4g}, eager by {eager_error:.4g}; rtol={rtol}, atol={atol}) "
                    f"[accuracy:{what}:values]")
        return f"{what} {i}: compiled differs from eager by up to {error:.4g} (rtol={rtol}, atol={atol}) [accuracy:{what}:values]"
    return None


def to_float64(value):
    """A copy of the inputs in float64 (the reference computation), other values as they are."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().to(torch.float64).requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(to_float64(v) for v in value)
    return value


def run_with_grads(fn, inputs):
    """Call ``fn`` and, when its outputs need gradients, backpropagate their sum; returns
    (outputs, gradients of the inputs that require them)."""
    outputs = fn(*inputs)
    wanting = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    differentiable = [t for t in tensors_in(outputs) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    if not wanting or not differentiable or not torch.is_grad_enabled():
        return outputs, None
    loss = sum(t.sum() for t in differentiable)
    grads = torch.autograd.grad(loss, wanting, allow_unused=True)
    return outputs, [g if g is not None else torch.zeros_like(x) for g, x in zip(grads, wanting)]


def clone_inputs(inputs):
    """Fresh copies of the inputs (same strides, same requires_grad), so a run that mutates
    its inputs does not disturb the next."""
    copies = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            if 0 in x.stride():  # an expanded tensor: its elements share memory
                copy = x.detach().clone()
            else:
                copy = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
                copy.copy_(x.detach())
            copies.append(copy.requires_grad_(x.requires_grad))
        else:
            copies.append(x)
    return copies


def rand_strided(shape, stride, dtype, device, generator, requires_grad=False):
    """A tensor of the given layout: normal floats, zero integers (valid indices), drawn from
    ``generator`` so that every process makes the same values."""
    size = 1 + sum((d - 1) * s for d, s in zip(shape, stride)) if all(d > 0 for d in shape) else 0
    if dtype.is_floating_point or dtype.is_complex:
        flat = torch.randn(size, generator=generator, dtype=torch.float64).to(dtype)
    else:
        flat = torch.zeros(size, dtype=dtype)
    tensor = torch.as_strided(flat.to(device), shape, stride)
    return tensor.detach().requires_grad_(True) if requires_grad else tensor
