"""A small model with four breaks the shape rules answer (dynscope/rewrites, docs/rewrites.md: *by shape*), each
at a line of its own, the rule named in a comment on the line (tests/integration/test_fix_shape_rules.py)."""
import torch


class GatedProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gate, mask):
        ctx.save_for_backward(x, gate, mask)
        return x * gate * mask

    @staticmethod
    def backward(ctx, grad):
        x, gate, mask = ctx.saved_tensors
        return grad * gate * mask, grad * x * mask, grad * x * gate


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, tokens, lengths, kept, mask):
        assert lengths.max().item() <= tokens.shape[1], "lengths exceed the padded sequence"  # assert-to-check:
        hidden = self.proj(tokens)
        heads = [hidden[:, kept[i]] for i in range(len(kept))]  # index-select-comprehension:
        picked = torch.stack(heads, 1)
        mixed = GatedProduct.apply(picked, mask, mask)  # clone-repeated-input:
        if mixed.mean().item() > 0:  # item-where:
            return mixed * 2
        return mixed


def main():
    torch.manual_seed(0)
    model = Block()
    step = torch.compile(model, backend="eager")
    tokens = torch.randn(4, 6)
    out = step(tokens, torch.tensor([3, 5]), torch.tensor([5, 0, 2]), torch.ones(4, 3))
    print(f"{out.sum().item():.4f}")


if __name__ == "__main__":
    main()
