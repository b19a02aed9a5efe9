r"""The M/G/1 queue of Sec. 5.1 / App. C.1.

Each of the $n = 500$ i.i.d. observations is the vector of the first 5
inter-departure times of a single-server queue that starts empty. Service times are
$u_k \sim U[\theta_1, \theta_2]$ and inter-arrival times $w_k \sim \text{Exp}(\text{rate }\theta_3)$:

$$
x_k = u_k + \max\Big(0, \sum_{j \le k} w_j - \sum_{j \le k-1} x_j\Big), \qquad k = 1..5,
$$

i.e. arrival time of customer $k$ minus the departure time of customer $k-1$
(Lindley recursion; $x_1 = u_1 + w_1$). Reparametrised with $U, V \sim U(0,1)$:
$u = \theta_1 + (\theta_2 - \theta_1) U$, $w = -\log V / \theta_3$.

The internal parameter is $\phi = (\theta_1, \theta_2 - \theta_1, \theta_3)$ with the
independent uniform prior on $[0,10]^2 \times [0, 0.5]$; `MG1.to_reported()` maps
back to $\theta$. The observed data constrain $\theta_1 \le \min_{ik} x_{ik}$,
so `MG1.support()` returns the admissible box
$[0, \min(10, \min x)] \times [0, 10] \times [0, 0.5]$ in $\phi$ coordinates
(used by the weight function of App. C.1.1, `MG1.weight_fn()`).

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 5.1, App. C.1)
    - Shestopaloff & Neal, On Bayesian inference for the M/G/1 queue with efficient MCMC
      sampling, 2014. <https://arxiv.org/abs/1401.5548>
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.distributions import Uniform

from ..priors import independent
from ..simulators import Simulator
from ._utils import uniform_open
from .base import Model

__all__ = ["MG1", "mg1_summaries", "queue_features"]


@dataclass(frozen=True)
class _MG1Sim:
    customers: int = 5

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """``(U [B, n, 5] in [0, 1), V [B, n, 5] in (0, 1])``."""
        U = torch.rand(B, n, self.customers, generator=generator, dtype=torch.float64)
        V = uniform_open((B, n, self.customers), generator)
        return U, V

    def transform(self, phi: Tensor, z: tuple[Tensor, Tensor]) -> Tensor:
        """``phi [B, 3] -> x [B, n, 5]``, differentiable in ``phi``."""
        U, V = z
        theta1, width, rate = (phi[:, k, None, None] for k in range(3))
        service = theta1 + width * U
        arrivals = torch.cumsum(-torch.log(V) / rate, dim=-1)
        departure = torch.zeros_like(service[..., 0])
        gaps = []
        for k in range(self.customers):
            start = torch.maximum(arrivals[..., k], departure)
            new_departure = start + service[..., k]
            gaps.append(new_departure - departure)
            departure = new_departure
        return torch.stack(gaps, dim=-1)


#: the uniform prior box of ``phi = (theta1, theta2 - theta1, theta3)`` (App. C.1)
PRIOR_BOX = ((0.0, 10.0), (0.0, 10.0), (0.0, 0.5))


def _uniform(low: float, high: float) -> Uniform:
    return Uniform(torch.tensor(low, dtype=torch.float64), torch.tensor(high, dtype=torch.float64))


def mg1_summaries(x: Tensor) -> Tensor:
    """BSL summaries: sample mean and element-wise SD over observations, ``[B, n, 5] -> [B, 10]``."""
    return torch.cat([x.mean(1), x.std(1)], dim=-1)


def queue_features(view: Tensor) -> Tensor:
    r"""Summaries of each observation for a score network's view (``ScoreLangevin(data_features=...)``):
    ``[..., k] -> [..., 2k]`` (k = 5 customers), the order statistics
    $x_{(1)} \le \dots \le x_{(k)}$ and the
    departure times since the queue opened, $\sum_{j \le l} x_j$ for $l = 1..k$.

    The service width $\theta_2 - \theta_1$ is identified by the upper edge of the busy
    service times; a small network on the raw times carries 0.07-0.23 of its score's information,
    and 0.34-0.61 with these summaries. They are deterministic functions of the observation, so the
    score-matching target is unchanged. Works on noise-smoothed observations too.
    """
    if view.ndim < 1 or view.shape[-1] < 1:
        raise ValueError(f"queue_features takes inter-departure times [..., k], got shape {tuple(view.shape)}")
    return torch.cat([torch.sort(view, dim=-1).values, torch.cumsum(view, dim=-1)], dim=-1)


class MG1(Model):
    r"""The M/G/1 queue; internal parameter $\phi = (\theta_1, \theta_2 - \theta_1, \theta_3)$.

    Arguments:
        n_obs: number of observed queues $n$ (500).
        true_parameters: $\theta^* = (\theta_1, \theta_2, \theta_3)$ in the *reported*
            parametrisation (default ``(1, 5, 0.2)``).
        customers: inter-departure times per observation (5).
    """

    summary_fn = staticmethod(mg1_summaries)

    def __init__(self, n_obs: int = 500, true_parameters=(1.0, 5.0, 0.2), customers: int = 5):
        theta = torch.as_tensor(true_parameters, dtype=torch.float64)
        phi = torch.stack([theta[0], theta[1] - theta[0], theta[2]])
        sim = _MG1Sim(customers)
        prior = independent([_uniform(low, high) for low, high in PRIOR_BOX])
        super().__init__(
            name="mg1", parameter_names=["theta1", "theta2_minus_theta1", "theta3"],
            reported_names=["theta1", "theta2", "theta3"], prior=prior,
            simulator=Simulator(latent=sim.latent, transform=sim.transform, obs_dim=customers),
            true_parameters=phi, n_obs=n_obs, obs_dim=customers,
            paper_settings=PAPER_SETTINGS,
        )

    def to_reported(self, phi: Tensor) -> Tensor:
        r"""``phi [..., 3] -> theta [..., 3]`` with $\theta_2 = \phi_1 + \phi_2$."""
        return torch.stack([phi[..., 0], phi[..., 0] + phi[..., 1], phi[..., 2]], dim=-1)

    def from_reported(self, theta: Tensor) -> Tensor:
        r"""``theta [..., 3] -> phi [..., 3]`` (inverse of `to_reported()`)."""
        return torch.stack([theta[..., 0], theta[..., 1] - theta[..., 0], theta[..., 2]], dim=-1)

    def support(self, x_obs: Tensor) -> tuple[Tensor, Tensor]:
        r"""Admissible box in $\phi$ given ``x_obs [n, 5]``: ``(low [3], high [3])``.

        $\theta_1 \le \min(10, \min_{ik} x_{ik})$ since every inter-departure time
        is at least one service time.
        """
        low = torch.zeros(3, dtype=torch.float64)
        high = torch.tensor([min(10.0, float(x_obs.min())), 10.0, 0.5], dtype=torch.float64)
        return low, high

    def weight_fn(self, phi: Tensor, x: Tensor) -> Tensor:
        r"""Box weight $g(\phi, X)$ ``[B, 3]`` of App. C.1.1 (eq. 19) from `support()`.

        $$
        g_j(\phi, X) = \mathrm{dist}(\phi_j, \partial[\ell_j(X), h_j(X)])
        = \max\big(0, \min(\phi_j - \ell_j, h_j - \phi_j)\big)
        $$

        with the box of `support()` computed per data set: $h_1 = \min(10, \min_{ik}
        x_{ik})$, so $g$ vanishes on the data-dependent boundary
        $\theta_1 = \min x$ (Euclidean distance, as the paper).

        Arguments:
            phi: internal parameters ``[B, 3]``.
            x: the data set simulated at each parameter ``[B, n, 5]`` (or one observation ``[B, 5]``).
        """
        if phi.ndim != 2 or phi.shape[-1] != 3:
            raise ValueError(f"phi must be [B, 3], got {tuple(phi.shape)}")
        if x.shape[0] != phi.shape[0]:
            raise ValueError(f"{x.shape[0]} data sets for {phi.shape[0]} parameters")
        low = torch.zeros_like(phi)
        xmin = x.reshape(x.shape[0], -1).min(-1).values.to(phi)
        high = torch.stack([torch.clamp(xmin, max=10.0), torch.full_like(xmin, 10.0),
                            torch.full_like(xmin, 0.5)], dim=-1)
        return torch.clamp(torch.minimum(phi - low, high - phi), min=0.0)


PAPER_SETTINGS = {
    "repetitions": 100,
    "localization": None,
    "single_model": {
        "N": 200_000, "N_R": 50_000, "m_R": 100, "noise_sd": 0.25, "noise_sets": 3,
        "samples_per_noise_set": 1000, "chains_per_noise_set": 1000,
        "score_net": {"activation": "tanh", "hidden": [64], "batch": 500, "lr": (1e-3, 1e-5),
                      "epochs": 500, "penalty_epochs": 100},
        "mean_net": {"activation": "tanh", "hidden": [64], "batch": 10, "lr": (1e-3, 1e-5),
                     "epochs": 500, "penalty_epochs": 300},
        "lambda1": 1e-8, "lambda2": 1e-8, "coordinates": "logit",
    },
    "n_model": {"N": 20_000, "activation": "tanh", "hidden": [64], "batch": 500, "lr": 1e-3,
                "epochs": 5000, "weight_function": True, "lambda": 0.0, "samples": 1000,
                "chains": 1000},
    "abc": {"N": 20_000, "keep": 200, "distance": "W1 on raw observations"},
    "bsl": {"summaries": "mean and SD of X (10)", "chains": 10, "length": 3000, "burn_in": 1000,
            "simulations_per_iteration": 100},
    "cost": {"single_model": 1.04e4, "n_model": 2e4, "abc": 2e4, "bsl": 3e6},
}
