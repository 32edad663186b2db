"""Backend bisection and graph minimization for failing torch.compile programs."""
