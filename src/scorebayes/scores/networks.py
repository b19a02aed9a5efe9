r"""Score networks $s_\phi(\theta, x)$ and the mean-regression network $h_\psi(\theta)$.

One architecture serves every structure of Jiang, Wang and Yang (2025):

- single-observation / n-model: $s_\phi(\theta, X_i)$ with ``x [*, p]``; the full-data
  score is the additive $\sum_i s_\phi(\theta, X_i)$ (Remark 3);
- full-data network on summary statistics: ``x = vec(S)`` (no additivity);
- Markov blockwise score $s(\theta, x_{i-1}, x_i)$: ``x = [x_{i-1}, x_i]`` (Remark 4).

`CoordinateViewScoreNet` (beyond the paper) gives each parameter its own small network
and its own view of the data, $s_j(\theta, x) = f_j(\theta, x_{V_j})$. Implicit score
matching separates over coordinates, so this is a restricted function class, not a new loss;
it helps when a parameter's information sits in a few known inputs (the epidemic's floor
rates in their own floor's column of $S$), which one wide network fails to pick out.

Inputs are standardised with robust statistics of the training table (median and
IQR / 1.349; buffers, saved with the state dict) and the output is divided by the parameter
scale, so a unit-scale network output is a score of the right order. Robust statistics matter
for heavy-tailed simulators: on the M/G/1 prior table (inter-arrival rate near 0 gives
inter-departure times up to 1e5) the mean/SD standardisation mapped all observed data into an
interval of width 0.005 and the network could not learn the dependence on the service width.

`ScoreNet.sum_over_observations()` evaluates $\sum_{i=1}^n s_\phi(\theta_c, X_i)$
for ``C`` chains at once, precomputing the first layer's data part $W_x X_i + b$
once per data set (the Langevin drift's hot path).

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853>
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .layers import ACTIVATIONS, Standardiser, activation_derivative, broadcast_leading, mlp
from .normal_scores import NormalScores
from .views import CoordinateViewScoreNet, check_embedding, check_tied, check_views

# CoordinateViewScoreNet (.views) and ACTIVATIONS (.layers) are exported here too, where callers import them
__all__ = ["ScoreNet", "CoordinateViewScoreNet", "MeanNet", "CrossFitMean", "ACTIVATIONS", "check_embedding",
           "check_tied", "check_views"]

class ScoreNet(nn.Module):
    r"""Per-observation score network $s_\phi(\theta, x) \in \mathbb R^d$.

    Arguments:
        theta_dim: $d$.
        x_dim: $p$ (length of one observation, or of ``vec(S)``).
        hidden: hidden layer widths, e.g. ``(64,)`` or ``(64, 64, 64)``.
        activation: ``"tanh"``, ``"elu"``, ... or an ``nn.Module`` class.
        normal_scores: heavy-tailed data columns as normal scores
            (`scorebayes.scores.normal_scores`); ``False``: standardised only.

    ``forward(theta [*, d], x [*, p]) -> [*, d]`` (leading shapes broadcast).
    """

    def __init__(self, theta_dim: int, x_dim: int, hidden: Sequence[int] = (64, 64),
                 activation: str | type[nn.Module] = "elu", *, normal_scores: bool = True):
        super().__init__()
        self.theta_dim, self.x_dim = theta_dim, x_dim
        self.theta_norm = Standardiser(theta_dim)
        self.x_marginal, self.x_norm = NormalScores(x_dim, enabled=normal_scores), Standardiser(x_dim)
        # the first affine map is kept apart: its theta and x columns are split on the hot path
        layers = list(mlp([theta_dim + x_dim, *hidden, theta_dim], activation))
        self.first = layers.pop(0) if hidden else None
        self.rest = nn.Sequential(*layers)

    def fit_standardisation(self, theta: Tensor, x: Tensor) -> None:
        """Set input statistics from a training table (``theta [N, d]``, ``x [..., p]``)."""
        self.theta_norm.fit(theta)
        self.x_norm.fit(self.x_marginal.fit(x))

    def data_input(self, x: Tensor) -> Tensor:
        """What the network sees of ``x [*, p]``: heavy-tailed columns as normal scores
        (`scorebayes.scores.normal_scores`), then robustly standardised."""
        return self.x_norm(self.x_marginal(x))

    def forward(self, theta: Tensor, x: Tensor) -> Tensor:
        t = self.theta_norm(theta)
        z = self.data_input(x)
        t, z = broadcast_leading(t, z)
        h = torch.cat([t, z], dim=-1)
        if self.first is not None:
            h = self.first(h)
        return self.rest(h) / self.theta_norm.scale

    def sum_over_observations(self, theta: Tensor, x: Tensor, *, max_elements: int = 2**18) -> Tensor:
        r"""$\sum_{i=1}^n s_\phi(\theta_c, X_i)$ for chains ``theta [C, d]``, data ``x [n, p]``.

        Returns ``[C, d]``. The first layer is split as $W_\theta\theta + (W_x X_i + b)$
        and the data part computed once. The last layer is affine, so the sum over observations
        is taken before it: $\sum_i (W h_i + b) = W \sum_i h_i + n b$, one small product
        per chain instead of one per pair (the same sum up to float rounding).

        Chains are processed in chunks (``_hidden_sum``, whole chains of ``n`` pairs) so
        that at most ``max_elements`` hidden activations of one layer are alive at a time.
        Between the small ``[c n, h] x [h, h]`` products the hidden layers are elementwise
        passes (the broadcast sum of the two first-layer parts, bias, activation, the sum over
        observations) whose speed is set by memory traffic, so a chunk should keep its few
        activation buffers in the core's cache: 2**18 floats is 1 MB a buffer, within a
        per-core L2 cache of a few MB. On such a CPU chunks of 2**15 to 2**22 floats run at
        about the same speed, while 2**24 (64 MB buffers, out of cache) is 1.5-1.8x slower;
        far smaller chunks pay each operation's per-call overhead more often.
        """
        if self.first is None:
            return self(theta[:, None, :], x[None]).sum(1)
        w_theta = self.first.weight[:, : self.theta_dim]
        w_x = self.first.weight[:, self.theta_dim :]
        data_part = self.data_input(x) @ w_x.T + self.first.bias  # [n, h]
        theta_part = self.theta_norm(theta) @ w_theta.T  # [C, h]
        n, width = data_part.shape
        last = self.rest[-1]  # mlp() ends with the affine output layer
        chunk = max(1, max_elements // max(1, n * width))
        summed = [self._hidden_sum(theta_part[start : start + chunk], data_part)
                  for start in range(0, theta.shape[0], chunk)]
        out = nn.functional.linear(torch.cat(summed, 0), last.weight)
        if last.bias is not None:
            out = out + n * last.bias
        return out / self.theta_norm.scale

    def _hidden_sum(self, theta_part: Tensor, data_part: Tensor) -> Tensor:
        """Last hidden layer summed over observations: ``theta_part [c, h]`` (chains' first-layer
        part), ``data_part [n, h]`` (observations' part with the bias) -> ``[c, h_last]``. One
        chunk of `sum_over_observations()`, a function of its own so that it can be compiled
        on its own (one graph per chunk shape) rather than with the chunk loop unrolled."""
        h = theta_part[:, None, :] + data_part[None]  # [c, n, h]
        for layer in self.rest[:-1]:
            h = layer(h)
        return h.sum(1)

    def sum_over_data_sets(self, theta: Tensor, x: Tensor) -> Tensor:
        r"""`sum_over_observations()` for ``M`` data sets at once:
        ``theta [M, C, d], x [M, n, p] -> [M, C, d]``, chain ``c`` of data set ``m`` summed over
        that data set's observations ([`scorebayes.sbi.checks.calibration.calibrate()`][scorebayes.sbi.checks.calibration.calibrate] runs its chains
        this way). Holds ``M C n`` first-layer activations at a time."""
        if self.first is None:
            return self(theta[:, :, None, :], x[:, None]).sum(2)
        w_theta, w_x = self.first.weight[:, : self.theta_dim], self.first.weight[:, self.theta_dim :]
        data_part = self.data_input(x) @ w_x.T + self.first.bias  # [M, n, h]
        theta_part = self.theta_norm(theta) @ w_theta.T  # [M, C, h]
        return self.rest(theta_part[:, :, None] + data_part[:, None]).sum(2) / self.theta_norm.scale

    def score_and_jacobian(self, theta: Tensor, x: Tensor) -> tuple[Tensor, Tensor] | None:
        r"""Scores and their $\theta$-Jacobian summed over observations, in one forward pass.

        $$
        s_{bi} = s_\phi(\theta_b, x_{bi}), \qquad
        J_b[j, l] = \sum_{i=1}^m \partial s_{\phi,j}(\theta_b, x_{bi}) / \partial\theta_l
        $$

        ``theta [B, d]``, ``x [B, m, p]`` -> ``(s [B, m, d], J [B, d, d])``. Forward-mode
        differentiation through the layers: the tangent of the first pre-activation along
        $\theta_l$ is the constant column $W_{\theta,l}/\text{scale}_l$, each
        activation multiplies it by $\sigma'(z)$, each linear layer by its weight. After the
        last activation the tangents are summed over the ``m`` observations (the remaining layer
        is linear), so the Jacobian costs about ``d`` extra hidden-layer products per
        observation instead of ``d`` backward passes, and training differentiates it with one
        ordinary backward pass instead of a double one.
        Returns ``None`` for an activation without a closed-form derivative here (the caller
        then uses autograd, `scorebayes.scores.losses.evaluate_score()`).
        """
        if self.first is None or any(not isinstance(layer, nn.Linear) and activation_derivative(layer) is None
                                     for layer in self.rest):
            return None
        d = self.theta_dim
        w_theta, w_x = self.first.weight[:, :d], self.first.weight[:, d:]
        h = (self.theta_norm(theta) @ w_theta.T)[:, None, :] + self.data_input(x) @ w_x.T + self.first.bias
        tangent = (w_theta / self.theta_norm.scale).T  # [d, H]: d(pre-activation)/d theta_l, constant
        layers = list(self.rest)
        last_activation = max(k for k, layer in enumerate(layers) if not isinstance(layer, nn.Linear))
        for k, layer in enumerate(layers):
            if isinstance(layer, nn.Linear):
                h = layer(h)
                tangent = tangent @ layer.weight.T
                continue
            y = layer(h)
            slope = activation_derivative(layer)(h, y)  # [B, m, H]
            if k == last_activation:  # only linear layers follow: sum over observations now
                tangent = (slope.sum(1)[:, None, :] * tangent if tangent.dim() == 2
                           else (slope[:, :, None, :] * tangent).sum(1))  # [B, d, H]
            else:
                tangent = slope[:, :, None, :] * tangent  # [B, m, d, H]
            h = y
        scale = self.theta_norm.scale
        return h / scale, tangent.transpose(-1, -2) / scale[:, None]

class MeanNet(nn.Module):
    r"""Mean-regression network $h_\psi(\theta) \approx \mathbb E_{p_\theta}[s_\phi(\theta, X)]$.

    ``forward(theta [*, d]) -> [*, d]``; same hidden structure as the score net by default
    (the paper found that works best, App. B.4).
    """

    def __init__(self, theta_dim: int, hidden: Sequence[int] = (64, 64),
                 activation: str | type[nn.Module] = "elu"):
        super().__init__()
        self.theta_norm = Standardiser(theta_dim)
        self.register_buffer("out_scale", torch.ones(theta_dim))
        self.net = mlp([theta_dim, *hidden, theta_dim], activation)

    def fit_standardisation(self, theta: Tensor, targets: Tensor) -> None:
        self.theta_norm.fit(theta)
        self.out_scale.copy_(targets.std(0).clamp_min(1e-6) if len(targets) > 1 else self.out_scale)

    def forward(self, theta: Tensor) -> Tensor:
        return self.net(self.theta_norm(theta)) * self.out_scale


class CrossFitMean(nn.Module):
    r"""Average of mean networks fitted on complementary folds of $\mathcal D^R$.

    $$
    h(\theta) = \frac1K\sum_{k=1}^K h_{\psi_k}(\theta)
    $$

    Each $h_{\psi_k}$ is trained on one half of the groups and validated on the other
    (the paper's 50% split), with the roles swapped for the second member, so every group's
    mean $\bar s_l$ enters the regression. The group means are noisy (variance
    $\mathrm{Var}(s)/m_R$), and this noise is what the debiased score inherits; averaging
    the two fold fits roughly halves its variance at no extra simulation cost.
    ``forward(theta [*, d]) -> [*, d]``.
    """

    def __init__(self, members: Sequence[nn.Module]):
        super().__init__()
        if not members:
            raise ValueError("CrossFitMean needs at least one member network")
        self.members = nn.ModuleList(members)

    def forward(self, theta: Tensor) -> Tensor:
        return torch.stack([m(theta) for m in self.members]).mean(0)
