r"""The epidemic's likelihood given its complete data: an exact reference for the SI model.

The summary matrix $S$ that inference sees is a function of the **complete data**
$C$: every person's hidden status $X_{i,t}$ at every step, and who was discharged
when. Given $C$ the likelihood is explicit (unlike given $S$). A person at risk at
step $t$ is susceptible at $t-1$ and not discharged at $t$. Such a person is
infected with probability $1 - e^{-h}$, where $h = a^\top\theta$ and

$$
a = \Bigl(\tfrac{\sum_l X_{l,t-1}}{N},\; \tfrac{\#\{\text{infected on } F_i\}}{60}\,
e_{F_i},\; \tfrac{\#\{\text{infected in } R_i\}}{c_R}\Bigr) \in \mathbb R^{J+2}
$$

(`EpidemicSimulator`'s hazard). Admissions, screening,
detection and discharge do not depend on $\theta$. Hence

$$
\log p(C\mid\theta) = \sum_{\text{infections}} \log\bigl(1 - e^{-a^\top\theta}\bigr)
- \Bigl(\sum_{\text{escapes}} a\Bigr)^{\!\top}\theta + \text{const},
\qquad
I_C(\theta) = \mathbb E \sum_{\text{at risk}} \frac{e^{-h}}{1 - e^{-h}}\, a a^\top .
$$

Since $S = f(C)$, $I_S \preceq I_C$, and averaged over any prior
$\mathbb E\operatorname{Var}(\theta_j\mid S) \ge \mathbb E\operatorname{Var}(\theta_j\mid C)$.
The posterior given $C$ is what someone who saw every infection would conclude: a
reference for the posteriors given $S$.

Shapes: ``X [B, T, N]`` hidden statuses (``EpidemicSimulator.run(..., return_states=True)``),
``discharged [B, T, N]`` bool (latent channel 2 below ``gamma``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .epidemic import FLOOR_SIZE, EpidemicSimulator

__all__ = ["hazard_covariates", "CompleteDataLikelihood", "complete_data_score"]


def hazard_covariates(simulator: EpidemicSimulator, infected: Tensor) -> Tensor:
    """``a [B, N, J+2]`` from the hidden statuses at the previous step ``infected [B, N]``; the
    hazard of person ``i`` is ``a[:, i] @ theta``. (Written apart from ``EpidemicSimulator.run``,
    which sums the same terms in its own order, so recorded simulations stay bit-identical; the
    tests hold the two to a per-person loop.)"""
    J, N = simulator.floors, simulator.size
    B = infected.shape[0]
    infected = infected.to(torch.float64)
    floor_count = infected.reshape(B, N // J, J).sum(1)  # person i is on floor i % J
    room_count = infected.reshape(B, 2, N // 2).sum(1)  # person i is in room i % (N/2)
    room_cap = 2.0 if simulator.room_normalisation == "capacity" else float(N)
    a = torch.zeros(B, N, J + 2, dtype=torch.float64)
    a[:, :, 0] = infected.sum(-1, keepdim=True) / N
    a[:, torch.arange(N), 1 + torch.arange(N) % J] = (floor_count / FLOOR_SIZE).repeat(1, N // J)
    a[:, :, J + 1] = (room_count / room_cap).repeat(1, 2)
    return a


def _steps(simulator: EpidemicSimulator, X: Tensor, discharged: Tensor):
    """Per step ``t >= 1``: ``(a [B, N, d], at_risk [B, N], infected_now [B, N])``."""
    if X.dim() != 3 or X.shape[1:] != (simulator.steps, simulator.size) or discharged.shape != X.shape:
        raise ValueError(f"X and discharged must both be [B, {simulator.steps}, {simulator.size}], got "
                         f"{tuple(X.shape)} and {tuple(discharged.shape)}")
    for t in range(1, X.shape[1]):
        a = hazard_covariates(simulator, X[:, t - 1])
        at_risk = (X[:, t - 1] == 0) & ~discharged[:, t].bool() & (a.sum(-1) > 0)
        yield a, at_risk, at_risk & (X[:, t] > 0)


class CompleteDataLikelihood:
    r"""$\log p(C\mid\theta)$ of one data set, up to a constant: ``log_prob(theta [K, d]) -> [K]``.

    Stores the covariates of the infections ``events [M, d]`` and the summed covariates of the
    escapes ``escapes [d]``; evaluation costs $O(KMd)$. Hazards must stay positive: a
    ``theta`` with $a^\top\theta \le 0$ at an infection gets ``-inf``.
    """

    def __init__(self, simulator: EpidemicSimulator, X: Tensor, discharged: Tensor):
        if X.dim() == 2:
            X, discharged = X[None], discharged[None]
        if X.shape[0] != 1:
            raise ValueError(f"one data set at a time: X [T, N] or [1, T, N], got {tuple(X.shape)}")
        d = simulator.floors + 2
        events, escapes = [], torch.zeros(d, dtype=torch.float64)
        for a, at_risk, infected in _steps(simulator, X, discharged):
            events.append(a[infected])
            escapes += a[at_risk & ~infected].sum(0)
        self.events = torch.cat(events) if events else torch.zeros(0, d, dtype=torch.float64)
        self.escapes = escapes

    def log_prob(self, theta: Tensor) -> Tensor:
        theta = theta.to(torch.float64)
        h = theta @ self.events.T  # [K, M]
        log_infected = torch.where(h > 0, torch.log(-torch.expm1(-h.clamp_min(1e-300))),
                                   torch.full_like(h, -torch.inf))
        return log_infected.sum(-1) - theta @ self.escapes


def complete_data_score(simulator: EpidemicSimulator, theta: Tensor, X: Tensor,
                        discharged: Tensor) -> tuple[Tensor, Tensor]:
    r"""The complete-data score $\nabla_\theta \log p(C_b\mid\theta)$ of each data set ``[B, d]``
    and the Fisher information averaged over them ``[d, d]`` (the expected information
    $I_C(\theta)$ when the ``B`` data sets are drawn at ``theta``)."""
    theta = theta.to(torch.float64)
    B, d = X.shape[0], simulator.floors + 2
    score, fisher = torch.zeros(B, d, dtype=torch.float64), torch.zeros(d, d, dtype=torch.float64)
    for a, at_risk, infected in _steps(simulator, X, discharged):
        h = a @ theta
        odds = torch.exp(-h) / (-torch.expm1(-h)).clamp_min(1e-300)  # e^-h / (1 - e^-h)
        dh = torch.where(infected, odds, -torch.ones_like(h)) * at_risk
        score += torch.einsum("bn,bnk->bk", dh, a)
        fisher += torch.einsum("bn,bni,bnj->ij", odds * at_risk, a, a) / B
    return score, fisher
