"""Score-based Langevin SBI on a linear regression, in Python (the same run as langevin_sbi.toml).

    python examples/langevin_sbi.py

Small settings, so that it runs in seconds; drop ``small`` for the quick defaults, or pass
``preset="paper"`` instead for the paper's settings (``table_size``: rows of the main table, here
single observations; ``num_simulations`` would be the whole budget, in data sets of size n).
Writes langevin_sbi_summary.txt and langevin_sbi_pairplot.png in the current folder.
"""

from pathlib import Path

import torch
from torch.distributions import Normal

from scorebayes import ScoreLangevin, independent
from scorebayes.sbi import TrainingSchedule


def simulate(theta: torch.Tensor, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Rows (x, y), y = a + b x + N(0, 0.5^2): theta [B, 2] -> x [B, n, 2]."""
    z = torch.randn(theta.shape[0], n, 2, generator=generator, dtype=theta.dtype)
    x = z[..., 0]
    y = theta[:, None, 0] + theta[:, None, 1] * x + 0.5 * z[..., 1]
    return torch.stack([x, y], dim=-1)


def main() -> None:
    truth = [0.5, -1.0]
    prior = independent([Normal(0.0, 3.0), Normal(0.0, 3.0)])
    x_obs = simulate(torch.tensor([truth]), 50, torch.Generator().manual_seed(1))[0]   # [n, p]
    small = dict(table_size=3000, num_groups=300, localization={"replicates": 20, "iterations": 100},
                 schedule=TrainingSchedule(epochs=20, penalty_epochs=5, patience=10),
                 mean_schedule=TrainingSchedule(epochs=20, penalty_epochs=5, batch_size=32),
                 curvature_penalties=(0.0, 1e-3), mean_penalties=(0.0,))
    est = ScoreLangevin.from_options(prior, simulate, parameter_names=["intercept", "slope"], seed=1,
                                     **small)
    posterior = est.fit(x_obs).sample(1000, chains=50)
    summary = posterior.format_summary(truth=truth)
    print(summary)
    Path("langevin_sbi_summary.txt").write_text(summary + "\n")
    posterior.pairplot("langevin_sbi_pairplot.png", truth=truth)


if __name__ == "__main__":
    main()
