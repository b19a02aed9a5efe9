r"""The learned likelihood score: one object that the samplers, checks and table rounds consume.

$$
\hat s(u; \mathbf X) = \sum_{k=1}^{m} \big[s_\phi(u, v_k(\mathbf X)) - h_\psi(u)\big]
\approx \nabla_u \log p(\mathbf X \mid T(u)),
$$

with $v_k$ the units of the data view ([`scorebayes.sbi.views`][scorebayes.sbi.views]), $s_\phi$ the
score network and $h_\psi$ the debiasing network (single mode; absent otherwise). The
object also knows where it may be trusted: the box of ``u`` the network was trained on (cut by
local debiasing corrections, [`scorebayes.sbi.debias`][scorebayes.sbi.debias]) and the data's support.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..parallel import make_generator
from ..priors import ParameterSpace
from .views import DataView

__all__ = ["DataSmoothing", "LearnedLikelihoodScore"]


class DataSmoothing:
    r"""Gaussian data smoothing $\tilde x = x + \sigma\varepsilon$ (App. B.2, solution 2),
    seeded by the run seed and a key, so the same key gives the same noise."""

    def __init__(self, sd: float, draws: int, seed: int):
        self.sd, self.draws, self.seed = float(sd), int(draws), seed

    def __call__(self, x: Tensor, *keys) -> Tensor:
        g = make_generator(self.seed, "noise", *keys)
        return x + self.sd * torch.randn(x.shape, generator=g, dtype=x.dtype)

    def with_generator(self, x: Tensor, generator: torch.Generator) -> Tensor:
        """Fresh noise from ``generator`` (data sets simulated for a check)."""
        return x + self.sd * torch.randn(x.shape, generator=generator, dtype=x.dtype)


class LearnedLikelihoodScore:
    r"""A fitted likelihood score in the unconstrained parameters ``u``.

    Arguments:
        space: the prior's [`ParameterSpace`][scorebayes.priors.ParameterSpace] (``u`` <-> ``theta``).
        view: the data view the networks were trained on.
        score_net: $s_\phi(u, v)$, with ``sum_over_observations(u [C, d], v [m, p]) -> [C, d]``.
        mean_net: $h_\psi(u)$ ``[C, d] -> [C, d]``, or ``None``.
        x_obs: the observed data ``[n, p]``.
        training_region: ``(low [d], high [d])``, the box of ``u`` the score net was trained on.
        support_fn: ``support_fn(x [n, p]) -> (low [d], high [d])`` in ``theta``, or ``None``.
        smoothing: the [`DataSmoothing`][scorebayes.sbi.likelihood.DataSmoothing] of the tables, or ``None``.
        device: where the networks are evaluated.

    ``refinements`` lists the local debiasing corrections applied to ``mean_net`` (their centre
    and spread cut the sampling region).
    """

    def __init__(self, space: ParameterSpace, view: DataView, score_net: nn.Module, mean_net: nn.Module | None,
                 x_obs: Tensor, *, training_region: tuple[Tensor, Tensor],
                 support_fn: Callable[[Tensor], tuple[Tensor, Tensor]] | None = None,
                 smoothing: DataSmoothing | None = None, device: torch.device | str = "cpu"):
        self.space, self.view, self.x_obs = space, view, x_obs
        self.score_net, self.mean_net = score_net, mean_net
        self.training_region, self.support_fn = training_region, support_fn
        self.smoothing, self.device = smoothing, torch.device(device)
        self.refinements: list[dict] = []
        self._compiled: tuple[nn.Module, Callable] | None = None
        self._view_cache: tuple | None = None

    @property
    def n_obs(self) -> int:
        return len(self.x_obs)

    def __call__(self, u: Tensor, x_obs: Tensor | None = None, *, compiled: bool = False) -> Tensor:
        r"""$\hat s(u; \mathbf X)$, ``u [C, d] -> [C, d]`` (float64), for ``x_obs`` (default
        the observed data). Differentiable in ``u``. ``compiled=True`` runs the sum through
        ``torch.compile`` when no gradient is needed (faster on long runs; needs a C++ compiler)."""
        data = self.observed_view(self.x_obs if x_obs is None else x_obs)
        uf = u.float().to(self.device)
        summed = self.score_net.sum_over_observations
        if compiled and not torch.is_grad_enabled():
            # keyed on the network: a later round replaces it
            if self._compiled is None or self._compiled[0] is not self.score_net:
                self._compiled = (self.score_net, torch.compile(summed))
            summed = self._compiled[1]
        total = summed(uf, data)
        if self.mean_net is not None:
            total = total - len(data) * self.mean_net(uf)
        return total.to(u.device, torch.float64)

    def observed_view(self, x_obs: Tensor) -> Tensor:
        """The view of ``x_obs [n, p]`` as float32 on the device, ``[m, p_net]``, built once per tensor.

        A chain evaluates the score with the same data tensor at every step; the cache holds the
        tensor itself (so its ``id`` cannot be reused) and its ``_version`` (bumped in place)."""
        key = (x_obs._version, self.device, self.view)
        cached = self._view_cache
        if cached is not None and cached[0] is x_obs and cached[1] == key:
            return cached[2]
        data = self.view.observed(x_obs).float().to(self.device)
        self._view_cache = (x_obs, key, data)
        return data

    def for_data_sets(self, views: list[Tensor]) -> Callable[[Tensor], Tensor]:
        """The score of chain ``c`` on data set ``m``, ``u [M, C, d] -> [M, C, d]``, for the views
        ``[m_j, p_net]`` of ``M`` data sets (float32, on the device)."""
        net, mean_net = self.score_net, self.mean_net
        if len({v.shape for v in views}) == 1 and hasattr(net, "sum_over_data_sets"):
            data = torch.stack(views)

            def summed(u: Tensor) -> Tensor:
                # data sets in chunks of about 2**22 first-layer activations (128 units assumed)
                per = max(1, (1 << 22) // max(1, u.shape[1] * data.shape[1] * 128))
                return torch.cat([net.sum_over_data_sets(u[i:i + per], data[i:i + per])
                                  for i in range(0, len(data), per)])
        else:
            def summed(u: Tensor) -> Tensor:
                return torch.stack([net.sum_over_observations(u[m], views[m]) for m in range(len(views))])
        counts = torch.tensor([float(len(v)) for v in views], device=self.device)[:, None, None]

        def score(u: Tensor) -> Tensor:
            uf = u.float().to(self.device)
            total = summed(uf)
            if mean_net is not None:
                total = total - counts * mean_net(uf)
            return total.to(u.device, torch.float64)

        return score

    def sampling_region(self) -> tuple[Tensor, Tensor]:
        """Box in ``u`` where chains may go: the training region, cut to the last local
        correction's centre +- 4 spreads (where its linear fit holds)."""
        low, high = self.training_region
        cuts = [r for r in self.refinements if r.get("kind") != "kernel"]  # kernel refits: no cut
        if cuts:
            low = torch.maximum(low, cuts[-1]["center"] - 4 * cuts[-1]["spread"])
            high = torch.minimum(high, cuts[-1]["center"] + 4 * cuts[-1]["spread"])
        return low, high

    def chain_box(self, x_obs: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Box in ``u`` the chains are reflected in, ``(low [d], high [d])``: the sampling region cut
        to the support (``support_fn``) of ``x_obs`` (default: the observed data)."""
        low, high = self.sampling_region()
        if self.support_fn is not None:
            s_low, s_high = self.support_fn(self.x_obs if x_obs is None else x_obs)
            to_u = self.space.to_unconstrained
            low = torch.maximum(low, to_u(torch.as_tensor(s_low, dtype=torch.float64)))
            high = torch.minimum(high, to_u(torch.as_tensor(s_high, dtype=torch.float64)))
        return low, high

    def noisy_copies(self) -> list[Tensor]:
        r"""The data the chains condition on: ``noise_draws`` smoothed copies
        $\mathbf X^* + \sigma\varepsilon_c$ ``[n, p]`` (the same on every call), or ``[x_obs]``."""
        if self.smoothing is None:
            return [self.x_obs]
        return [self.smoothing(self.x_obs, "observed", c) for c in range(self.smoothing.draws)]
