"""A tiny Inductor program for compile caches: run it twice with the same cache directory and
the second run loads its compiled graph from the caches instead of compiling it.

    python examples/warm_start.py [--comment-origin] [--then-comment-origin] [--save-cache FILE | --load-cache FILE]

--comment-origin changes one Inductor setting (torch._inductor.config.comment_origin: comments
in the generated code, nothing else), so its cache key differs from a run without it;
--then-comment-origin compiles once, changes that setting and compiles the function again
(after torch._dynamo.reset()), so the second compile misses the cache for that setting alone.
--save-cache / --load-cache write and read torch's portable cache artifacts
(torch.compiler.save_cache_artifacts / load_cache_artifacts).
"""

import argparse

import torch


def scaled_gelu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ w) * 0.5 + x.sum()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--comment-origin", action="store_true", help="change one Inductor setting")
    parser.add_argument("--then-comment-origin", action="store_true",
                        help="compile, change that setting, compile again")
    parser.add_argument("--save-cache", metavar="FILE", help="save torch's portable cache artifacts here")
    parser.add_argument("--load-cache", metavar="FILE", help="load torch's portable cache artifacts first")
    args = parser.parse_args()
    if args.comment_origin:
        torch._inductor.config.comment_origin = True
    if args.load_cache:
        with open(args.load_cache, "rb") as f:
            torch.compiler.load_cache_artifacts(f.read())
    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    out = torch.compile(scaled_gelu, backend="inductor")(x, w)
    print(f"sum: {out.sum().item():.4f}")
    if args.then_comment_origin:
        torch._inductor.config.comment_origin = True
        torch._dynamo.reset()
        out = torch.compile(scaled_gelu, backend="inductor")(x, w)
        print(f"sum again: {out.sum().item():.4f}")
    if args.save_cache:
        saved = torch.compiler.save_cache_artifacts()
        if saved is not None:
            with open(args.save_cache, "wb") as f:
                f.write(saved[0])


if __name__ == "__main__":
    main()
