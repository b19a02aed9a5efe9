"""A batched simulator for examples/langevin_sbi.toml: rows (x, y), y = a + b x + N(0, 0.5^2)."""

import torch


def simulate(theta: torch.Tensor, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """theta [B, 2] -> x [B, n, 2]."""
    z = torch.randn(theta.shape[0], n, 2, generator=generator, dtype=theta.dtype)
    x = z[..., 0]
    y = theta[:, None, 0] + theta[:, None, 1] * x + 0.5 * z[..., 1]
    return torch.stack([x, y], dim=-1)
