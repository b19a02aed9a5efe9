r"""Targets of the score-based MH experiments: samplers, and densities/scores where known.

- 2-d/3-d toys (sampled only): moons, pinwheel (Algorithm 3 of the paper, ``K = 5``), s-curve,
  swiss roll (the scikit-learn generators with the paper's noise levels).
- Gaussian mixture $0.8\,\mathcal N((5,5), I) + 0.2\,\mathcal N((-5,-5), I)$ (Fig. 1),
  Gaussian $\mathcal N(3, 2)$ (Fig. 14, variance 2), GEV($\mu, \sigma, \xi$) (App. B):
  samplers plus exact log-densities and scores.

Pinwheel (Algorithm 3): labels $y_i$ uniform on $\{0..K-1\}$, $r_i\sim\mathcal N(1,\sigma_r^2)$,
$\delta_i\sim\mathcal N(0,\sigma_t^2)$, $\phi_i = 2\pi y_i/K + \alpha r_i$, output
$(r_i\cos\phi_i + \delta_i, r_i\sin\phi_i + \delta_i)$ (one shared $\delta_i$).
``variant="johnson"`` gives the usual pinwheel of Johnson et al. (2016).

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025), App. B and D
      <https://arxiv.org/abs/2501.00467>
    - Composing graphical models with neural networks (Johnson et al., 2016)
      <https://arxiv.org/abs/1603.06277>
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "TOY_DATASETS",
    "make_toy",
    "pinwheel",
    "GaussianMixture",
    "GEV",
    "gaussian_target",
]


def _seed(generator: torch.Generator | None) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=generator))


def pinwheel(num: int, *, num_classes: int = 5, radial_std: float = 0.5, tangential_std: float = 0.05,
             rate: float = 0.25, variant: str = "paper",
             generator: torch.Generator | None = None) -> Tensor:
    """Pinwheel samples ``[num, 2]`` (float64); see the module docstring."""
    labels = torch.randint(0, num_classes, (num,), generator=generator)
    base = 2 * math.pi * labels.double() / num_classes
    if variant == "paper":
        r = 1 + radial_std * torch.randn(num, generator=generator, dtype=torch.float64)
        delta = tangential_std * torch.randn(num, generator=generator, dtype=torch.float64)
        phi = base + rate * r
        return torch.stack([r * phi.cos() + delta, r * phi.sin() + delta], dim=1)
    if variant == "johnson":
        feats = torch.randn(num, 2, generator=generator, dtype=torch.float64)
        feats = feats * torch.tensor([radial_std, tangential_std], dtype=torch.float64)
        feats[:, 0] += 1.0
        angle = base + rate * feats[:, 0].exp()
        c, s = angle.cos(), angle.sin()
        rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
        return torch.einsum("nij,nj->ni", rot, feats)
    raise ValueError(f"pinwheel variant must be 'paper' or 'johnson', got {variant!r}")


def make_toy(name: str, num: int, *, generator: torch.Generator | None = None) -> Tensor:
    """Samples ``[num, d]`` (float64) of ``moons`` / ``pinwheel`` / ``s-curve`` / ``swiss-roll``."""
    from sklearn import datasets as skd

    if name == "moons":
        x, _ = skd.make_moons(n_samples=num, noise=0.1, random_state=_seed(generator))
    elif name == "pinwheel":
        return pinwheel(num, generator=generator)
    elif name == "s-curve":
        x, _ = skd.make_s_curve(n_samples=num, noise=0.1, random_state=_seed(generator))
    elif name == "swiss-roll":
        x, _ = skd.make_swiss_roll(n_samples=num, noise=0.5, random_state=_seed(generator))
    else:
        raise ValueError(f"unknown toy dataset {name!r}; choose one of {TOY_DATASETS}")
    return torch.as_tensor(x, dtype=torch.float64)


TOY_DATASETS = ("moons", "pinwheel", "s-curve", "swiss-roll")


class GaussianMixture:
    r"""Isotropic Gaussian mixture $\sum_k w_k \mathcal N(m_k, s^2 I)$.

    Arguments:
        means: ``[K, d]``; weights: ``[K]``; scale: common standard deviation $s$.
    """

    def __init__(self, means: Tensor, weights: Tensor, scale: float = 1.0):
        self.means = torch.as_tensor(means, dtype=torch.float64)
        self.weights = torch.as_tensor(weights, dtype=torch.float64)
        self.weights = self.weights / self.weights.sum()
        self.scale = float(scale)

    @classmethod
    def paper(cls) -> GaussianMixture:
        r"""$0.8\,\mathcal N((5,5), I) + 0.2\,\mathcal N((-5,-5), I)$ (Fig. 1)."""
        return cls(torch.tensor([[5.0, 5.0], [-5.0, -5.0]]), torch.tensor([0.8, 0.2]))

    def sample(self, num: int, *, generator: torch.Generator | None = None) -> Tensor:
        """Draws ``[num, d]``."""
        k = torch.multinomial(self.weights, num, replacement=True, generator=generator)
        noise = torch.randn(num, self.means.shape[1], generator=generator, dtype=torch.float64)
        return self.means[k] + self.scale * noise

    def _component_logits(self, x: Tensor) -> Tensor:
        diff = x[:, None, :] - self.means.to(x)
        return self.weights.to(x).log() - 0.5 * (diff**2).sum(-1) / self.scale**2

    def log_prob(self, x: Tensor) -> Tensor:
        r"""$\log p(x)$ up to a constant, ``[C]``."""
        return torch.logsumexp(self._component_logits(x), dim=-1)

    def score(self, x: Tensor) -> Tensor:
        r"""$\nabla\log p(x)$ ``[C, d]`` (responsibility-weighted)."""
        resp = torch.softmax(self._component_logits(x), dim=-1)
        return (resp[:, :, None] * (self.means.to(x) - x[:, None, :])).sum(1) / self.scale**2

    def mode_weights(self, x: Tensor) -> Tensor:
        """Fraction of points ``x [n, d]`` nearest to each mean, ``[K]``."""
        nearest = torch.cdist(x.to(self.means), self.means).argmin(1)
        return torch.bincount(nearest, minlength=len(self.weights)).double() / len(x)


def gaussian_target(mean: float = 3.0, variance: float = 2.0) -> GaussianMixture:
    """The 1-d Gaussian of Fig. 14 (variance 2 by default) as a one-component mixture."""
    return GaussianMixture(torch.tensor([[mean]]), torch.tensor([1.0]), scale=math.sqrt(variance))


class GEV:
    r"""Generalised extreme value distribution GEV($\mu, \sigma, \xi$) on $\mathbb R$ (``[C, 1]``).

    With $z = (x-\mu)/\sigma$ and $t = 1 + \xi z > 0$:
    $\log f = -\log\sigma - (1 + 1/\xi)\log t - t^{-1/\xi}$ (Gumbel at $\xi = 0$).
    """

    def __init__(self, xi: float, loc: float = 0.0, scale: float = 1.0):
        self.xi, self.loc, self.scale = float(xi), float(loc), float(scale)

    def _t(self, x: Tensor) -> Tensor:
        return 1 + self.xi * (x - self.loc) / self.scale

    def in_support(self, x: Tensor) -> Tensor:
        r"""``bool [C]``: $1 + \xi z > 0$ for every coordinate."""
        return (self._t(x) > 0).all(-1) if self.xi != 0 else torch.isfinite(x).all(-1)

    def log_prob(self, x: Tensor) -> Tensor:
        """``[C]``, ``-inf`` outside the support."""
        z = (x - self.loc) / self.scale
        if self.xi == 0:
            lp = -z - torch.exp(-z)
        else:
            t = self._t(x)
            tc = t.clamp_min(1e-300)
            lp = -(1 + 1 / self.xi) * tc.log() - tc ** (-1 / self.xi)
            lp = torch.where(t > 0, lp, torch.full_like(lp, -torch.inf))
        return (lp - math.log(self.scale)).sum(-1)

    def score(self, x: Tensor) -> Tensor:
        r"""$\partial_x\log f$ ``[C, 1]`` (0 outside the support)."""
        z = (x - self.loc) / self.scale
        if self.xi == 0:
            return (-1 + torch.exp(-z)) / self.scale
        t = self._t(x)
        tc = t.clamp_min(1e-300)
        s = (-(1 + self.xi) / tc + tc ** (-1 / self.xi - 1)) / self.scale
        return torch.where(t > 0, s, torch.zeros_like(s))

    def sample(self, num: int, *, generator: torch.Generator | None = None) -> Tensor:
        r"""Draws ``[num, 1]`` by inversion: $x = \mu + \sigma((-\log U)^{-\xi} - 1)/\xi$."""
        u = torch.rand(num, 1, generator=generator, dtype=torch.float64).clamp(1e-300, 1 - 1e-16)
        e = -u.log()
        z = -e.log() if self.xi == 0 else (e ** (-self.xi) - 1) / self.xi
        return self.loc + self.scale * z
