"""DFD-Bayes for a Conway-Maxwell-Poisson model given as a plain log-pmf (cf. dfd_bayes.toml).

    python examples/dfd_bayes.py

Small settings (20 bootstrap minimisers, short chains), so that it runs in seconds; the paper's
are 100 minimisers and 10 chains of 5,000 burn-in steps. Writes dfd_bayes_summary.txt and
dfd_bayes_samples.csv in the current folder.
"""

from pathlib import Path

import torch
from torch.distributions import Gamma

from scorebayes import dfd_bayes, independent
from scorebayes.discrete import UserModel, sample_cmp


def log_p(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Unnormalised CMP log-pmf, theta1^x / (x!)^theta2: theta [B, 2], x [n, 1] -> [B, n]."""
    return x[:, 0] * theta[:, :1].log() - theta[:, 1:] * torch.lgamma(x[:, 0] + 1)


def main() -> None:
    truth = [4.0, 0.75]
    model = UserModel(log_p, domain=[[0, float("inf")]], names=["rate", "dispersion"])
    prior = independent([Gamma(1.5, 0.5), Gamma(1.5, 0.5)])    # chi-squared(3), as in the paper
    x = sample_cmp(torch.tensor(truth), 500, generator=torch.Generator().manual_seed(0))
    posterior = dfd_bayes(model, x, prior, num_bootstrap=20, num_chains=4, num_samples=250,
                          burn_in=1000, thin=2, seed=0)
    summary = posterior.format_summary(truth=truth) + f"\nbeta* = {posterior.info['beta']:.3f}"
    print(summary)
    Path("dfd_bayes_summary.txt").write_text(summary + "\n")
    posterior.to_csv("dfd_bayes_samples.csv")


if __name__ == "__main__":
    main()
