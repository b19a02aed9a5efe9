r"""Score networks with one small network per parameter, each on its own view of the data.

`CoordinateViewScoreNet` gives coordinate $j$ the network
$s_j(\theta, x) = f_j(\theta, x_{V_j})/\text{scale}_j$. Implicit score matching separates
over coordinates, so this is a restricted function class, not a new loss; it helps when a
parameter's information sits in a few known inputs (the epidemic's floor rates in their own
floor's column of $S$), which one wide network fails to pick out.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853>
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .layers import Standardiser, activation_class, activation_derivative, broadcast_leading, mlp
from .normal_scores import NormalScores

__all__ = ["CoordinateViewScoreNet", "check_embedding", "check_tied", "check_views"]


class CoordinateViewScoreNet(nn.Module):
    r"""One network per parameter, each on its own view of the data:
    $s_j(\theta, x) = f_j\big(\theta, x_{V_j}\big) / \text{scale}_j$.

    Implicit score matching, $\sum_j [\tfrac12 s_j^2 + s_j\,\partial_j\log q + \partial_j s_j]$,
    separates over coordinates, so each $f_j$ may see only the inputs $V_j$ that carry
    $\theta_j$'s information (plus all of $\theta$). Networks whose views have the same
    length are evaluated together with batched weights ``[g, in, out]`` (one block per length), so
    views may differ in length (e.g. one coordinate sees every input, the others a few).

    What a view learns: over functions of $(\theta, x_{V_j})$ the objective is minimised by
    $E[\partial_j \log p(x \mid \theta) \mid \theta, x_{V_j}] = \partial_j \log p(x_{V_j}
    \mid \theta)$, the score of the view's own likelihood. If $x_{V_j}$ misses information
    about $\theta_j$ (it is not sufficient for $\theta_j$ given $\theta_{-j}$),
    the coordinates' scores come from different likelihoods, the drift is no gradient, and the
    Langevin chains sample a composite law, not the posterior: in a linear Gaussian model its
    covariance solves a Lyapunov equation, and a coordinate whose view misses half of its data is
    1.5x the posterior's SD (``tests/test_coordinate_views.py``,
    ``test_views_that_miss_information_give_a_composite_law_not_the_posterior``). Give each
    coordinate a view that carries all of its information (e.g. appended summaries, through
    ``ScoreLangevin(data_features=...)``).

    Tied coordinates share one network. For a group $G = (g_0, \dots, g_{m-1})$ of
    exchangeable coordinates (the likelihood is unchanged when the coordinates of $G$ and
    their views are permuted together, as the epidemic's floors are), the true score is
    equivariant, $s_{g_a}(\theta, x) = f(\theta_{g_a}, \theta_{g_{a+1}}, \dots,
    \theta_{g_{a-1}}, \theta_{\text{rest}}, x_{V_{g_a}})$, with one $f$ for the whole group:
    member $a$ sees the group's coordinates in cyclic order from its own, then the others.
    Each training row then teaches $f$ $m$ times (the floors' nets of the epidemic
    learn from ten times the rows). Position $k$ of every member's view must play the same
    role (e.g. the facility column, then the member's own column); the standardisation pools each
    group's coordinates, and each position's columns over the members, so that $f$ sees
    every member on one scale.

    A shared embedding keeps the networks small without dropping information:
    $s_j(\theta, x) = f_j\big(\theta, x_{V_j}, e(x)\big) / \text{scale}_j$, with one
    $e: \mathbb R^p \to \mathbb R^k$ (an MLP on all of $x$) trained jointly with every
    $f_j$. The minimiser over such functions is the full score whenever $(x_{V_j}, e(x))$
    carries $\theta_j$'s information, so the drift is a gradient again and the chains sample
    the posterior (``test_views_that_miss_information_give_a_composite_law_not_the_posterior``: with an
    embedding the view that misses half of its data gives the posterior's SD).
    $e$ does not depend on $\theta$, so the chain drift still computes every data
    part once (`sum_over_observations()`). Beyond the paper: on the 12-parameter epidemic
    the embedding gave narrower intervals than the views alone, with the facility rate placed
    higher (2 data sets).

    Arguments:
        theta_dim: $d$.
        x_dim: $p$, the length of the network's view of the data (e.g. ``vec(S)``).
        views: ``d`` non-empty index lists into ``x``'s last axis
            (e.g. `scorebayes.models.Epidemic.score_views()`).
        hidden: hidden widths of each $f_j$; activation as for `ScoreNet`.
        tied: disjoint groups of at least two coordinates that share one network (their views of
            one length), e.g. `scorebayes.models.Epidemic.exchangeable_rates()`; default none.
        embedding: $k$, the width of the shared embedding $e(x)$ appended to every
            view; 0 (default) for none. Not with ``tied`` (a tied group's network must see its
            members' data in the same roles, and $e$ is not permuted with them).
        embedding_hidden: hidden widths of $e$.
        normal_scores: as in `ScoreNet`.

    ``forward(theta [*, d], x [*, p]) -> [*, d]`` (leading shapes broadcast); inputs are
    standardised as in `ScoreNet`.
    """

    def __init__(self, theta_dim: int, x_dim: int, views: Sequence[Sequence[int]],
                 hidden: Sequence[int] = (128, 64), activation: str | type[nn.Module] = "elu",
                 tied: Sequence[Sequence[int]] = (), embedding: int = 0,
                 embedding_hidden: Sequence[int] = (64,), normal_scores: bool = True):
        super().__init__()
        views = check_views(views, theta_dim, x_dim)
        self.tied = check_tied(tied, views)
        check_embedding(embedding, self.tied)
        self.theta_dim, self.x_dim = theta_dim, x_dim
        self.theta_norm = Standardiser(theta_dim)
        self.x_marginal, self.x_norm = NormalScores(x_dim, enabled=normal_scores), Standardiser(x_dim)
        self.act = activation_class(activation)()
        self.embed = None
        if embedding:
            self.embed = mlp([x_dim, *embedding_hidden, embedding], activation)
            # every network sees its view and then the embedding's k outputs, at x_dim .. x_dim + k - 1
            views = [[*v, *range(x_dim, x_dim + embedding)] for v in views]
        in_groups = {j for group in self.tied for j in group}
        blocks = [_ViewBlock(theta_dim, group, [views[j] for j in group], hidden,
                             orders=_cyclic_orders(group, theta_dim)) for group in self.tied]
        free = [j for j in range(theta_dim) if j not in in_groups]
        for n in sorted({len(views[j]) for j in free}):
            coords = [j for j in free if len(views[j]) == n]
            blocks.append(_ViewBlock(theta_dim, coords, [views[j] for j in coords], hidden))
        self.blocks = nn.ModuleList(blocks)
        # outputs come block by block; ``order`` puts them back in coordinate order
        coords = torch.cat([b.coords for b in self.blocks])
        self.register_buffer("order", torch.argsort(coords))
        # columns standardised together: each tied group's coordinates, and per view position
        # the columns its members see there (merged where they overlap)
        self._theta_pools = [list(g) for g in self.tied]
        self._x_pools = _merged([{views[j][k] for j in group} for group in self.tied
                                 for k in range(len(views[group[0]]))])

    def fit_standardisation(self, theta: Tensor, x: Tensor) -> None:
        """Set input statistics from a training table (``theta [N, d]``, ``x [..., p]``)."""
        self.theta_norm.fit(theta, self._theta_pools)
        self.x_norm.fit(self.x_marginal.fit(x, self._x_pools), self._x_pools)

    def _data(self, x: Tensor) -> Tensor:
        """Standardised ``x [..., p]``, with the shared embedding appended: ``[..., p + k]``."""
        z = self.x_norm(self.x_marginal(x))  # heavy-tailed columns as normal scores, standardised
        return z if self.embed is None else torch.cat([z, self.embed(z)], -1)

    def forward(self, theta: Tensor, x: Tensor) -> Tensor:
        t, z = broadcast_leading(self.theta_norm(theta), self._data(x))
        out = torch.cat([block(t, z, self.act) for block in self.blocks], -1)[..., self.order]
        return out / self.theta_norm.scale

    def sum_over_observations(self, theta: Tensor, x: Tensor, *, max_elements: int = 2**20) -> Tensor:
        r"""$\sum_{i=1}^n s(\theta_c, X_i)$: ``theta [C, d], x [n, p] -> [C, d]`` (chains chunked).

        As in `ScoreNet.sum_over_observations()`, each network's first layer is split as
        $W_\theta\theta + (W_x X_{i,V_j} + b)$ and the data part computed once for all
        chains: with long views (hundreds of inputs) the first layer is most of the work."""
        width = max(w.shape[-1] for b in self.blocks for w in b.weights)
        chunk = max(1, max_elements // max(1, x.shape[0] * self.theta_dim * width))
        t_all = self.theta_norm(theta)
        z = self._data(x)
        data_parts = [block.first_layer_data(z) for block in self.blocks]  # [n, g, H] each
        out = []
        for i in range(0, theta.shape[0], chunk):
            t = t_all[i:i + chunk, None, :]  # [c, 1, d]
            out.append(torch.cat([block.forward_from_data(t, part, self.act).sum(1)
                                  for block, part in zip(self.blocks, data_parts)], -1))
        return torch.cat(out, 0)[..., self.order] / self.theta_norm.scale

    def sum_over_data_sets(self, theta: Tensor, x: Tensor) -> Tensor:
        r"""`sum_over_observations()` for ``M`` data sets at once:
        ``theta [M, C, d], x [M, n, p] -> [M, C, d]``, chain ``c`` of data set ``m`` summed over
        that data set's observations (each data set's first-layer data part computed once;
        [`scorebayes.sbi.checks.calibration.calibrate()`][scorebayes.sbi.checks.calibration.calibrate] runs its chains this way). Holds
        ``M C n`` first-layer activations per network at a time: meant for small ``n`` (a
        full-data view has ``n = 1``)."""
        t = self.theta_norm(theta)[:, :, None, :]  # [M, C, 1, d]
        z = self._data(x)
        out = torch.cat([block.forward_from_data(t, block.first_layer_data(z)[:, None], self.act).sum(2)
                         for block in self.blocks], -1)
        return out[..., self.order] / self.theta_norm.scale

    def score_and_jacobian(self, theta: Tensor, x: Tensor) -> tuple[Tensor, Tensor] | None:
        r"""``theta [B, d], x [B, m, p] -> (s [B, m, d], J [B, d, d])``,
        $J_b = \sum_i \nabla_\theta s(\theta_b, x_{bi})$.

        Forward mode as in `ScoreNet.score_and_jacobian()`: the tangent of $f_j$'s first
        pre-activation along $\theta_l$ is the constant $W^{(1)}_{j,l}/\text{scale}_l$."""
        slope_of = activation_derivative(self.act)
        if slope_of is None:
            return None
        t, z = broadcast_leading(self.theta_norm(theta[:, None, :]), self._data(x))
        outs, rows = zip(*(block.forward_with_tangent(t, z, self.act, slope_of, self.theta_norm.scale)
                           for block in self.blocks))
        scale = self.theta_norm.scale
        score = torch.cat(outs, -1)[..., self.order] / scale
        jacobian = torch.cat(rows, 1)[:, self.order] / scale[:, None]
        return score, jacobian


class _ViewBlock(nn.Module):
    """The networks $f_j$ of the coordinates ``coords`` (views of one length ``v``), with
    batched weights ``[g, in, out]`` (``nn.Linear``'s initialisation per coordinate).

    ``orders`` (``[g, d]``, for a tied group): one network, weights ``[1, in, out]``, which member
    ``j`` evaluates on theta in the order ``orders[j]``. Feeding ``t[orders[j]]`` to weights
    $W$ is feeding ``t`` to $W$ with its rows permuted back (`_theta_weight()`),
    so every pass below works on ``t`` as it is."""

    def __init__(self, theta_dim: int, coords: list[int], views: list[list[int]], hidden: Sequence[int],
                 orders: list[list[int]] | None = None):
        super().__init__()
        self.theta_dim = theta_dim
        self.register_buffer("coords", torch.tensor(coords, dtype=torch.long))  # [g]
        self.register_buffer("views", torch.tensor(views, dtype=torch.long))  # [g, v]
        self.tied = orders is not None
        if self.tied:  # inverse[j, l]: where member j's input holds theta_l
            self.register_buffer("inverse", torch.argsort(torch.tensor(orders, dtype=torch.long), -1))
        copies = 1 if self.tied else len(coords)
        widths = [theta_dim + len(views[0]), *hidden, 1]
        self.weights, self.biases = nn.ParameterList(), nn.ParameterList()
        for a, b in zip(widths[:-1], widths[1:]):
            bound = a ** -0.5
            self.weights.append(nn.Parameter(torch.empty(copies, a, b).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(copies, b).uniform_(-bound, bound)))

    def _layer(self, k: int) -> tuple[Tensor, Tensor]:
        """Layer ``k``'s weights ``[g, a, b]`` and biases ``[g, b]`` (a tied block's one copy, expanded)."""
        g = len(self.coords)
        w, b = self.weights[k], self.biases[k]
        return w.expand(g, *w.shape[1:]), b.expand(g, b.shape[-1])

    def _theta_weight(self) -> Tensor:
        """The first layer's theta rows ``[g, d, H]``, row ``l`` of network ``j`` acting on theta_l."""
        w = self._layer(0)[0][:, :self.theta_dim, :]
        if not self.tied:
            return w
        return w[torch.arange(len(self.coords), device=w.device)[:, None], self.inverse]

    def forward(self, t: Tensor, z: Tensor, act: nn.Module) -> Tensor:
        """``[*, d], [*, p] -> [*, g]``: the networks' outputs before the parameter scale."""
        return self.forward_from_data(t, self.first_layer_data(z), act)

    def first_layer_data(self, z: Tensor) -> Tensor:
        """The data's part of the first pre-activation, $W_x z_{V_j} + b$: ``[*, p] -> [*, g, H]``."""
        w, b = self._layer(0)
        return torch.einsum("...jv,jvh->...jh", z[..., self.views], w[:, self.theta_dim:, :]) + b

    def forward_from_data(self, t: Tensor, data_part: Tensor, act: nn.Module) -> Tensor:
        """`forward()` with the data part of the first layer given:
        ``t [*, d], data_part [*, g, H]`` (broadcast) ``-> [*, g]``."""
        h = torch.einsum("...d,jdh->...jh", t, self._theta_weight()) + data_part
        for k in range(1, len(self.weights)):
            w, b = self._layer(k)
            h = torch.einsum("...ja,jab->...jb", act(h), w) + b
        return h[..., 0]

    def forward_with_tangent(self, t: Tensor, z: Tensor, act: nn.Module, slope_of, scale: Tensor
                             ) -> tuple[Tensor, Tensor]:
        """``t [B, m, d], z [B, m, p] -> (outputs [B, m, g], sum_i d output / d theta [B, g, d])``."""
        w_theta = self._theta_weight()  # [g, d, H]
        h = self.first_layer_data(z) + torch.einsum("...d,jdh->...jh", t, w_theta)  # [B, m, g, H]
        # [1, 1, g, d, H]: d(first pre-activation of f_j)/d theta_l
        tangent = (w_theta / scale[None, :, None])[None, None]
        for k in range(len(self.weights)):
            if k > 0:
                w, b = self._layer(k)
                tangent = torch.einsum("...jla,jab->...jlb", tangent, w)
                h = torch.einsum("...ja,jab->...jb", h, w) + b
            if k < len(self.weights) - 1:
                y = act(h)
                tangent = slope_of(h, y)[..., None, :] * tangent
                h = y
        return h[..., 0], tangent[..., 0].sum(1)


def _cyclic_orders(group: Sequence[int], theta_dim: int) -> list[list[int]]:
    """Member ``a`` of ``group``'s view of theta: the group from ``group[a]`` on, cyclically,
    then the other coordinates in their order."""
    rest = [j for j in range(theta_dim) if j not in group]
    return [list(group[a:]) + list(group[:a]) + rest for a in range(len(group))]


def _merged(sets: list[set[int]]) -> list[list[int]]:
    """Overlapping sets merged (a partition of their union); sets of one column dropped."""
    out: list[set[int]] = []
    for new in sets:
        new = set(new)
        for old in [o for o in out if o & new]:
            out.remove(old)
            new |= old
        out.append(new)
    return [sorted(o) for o in out if len(o) > 1]


def check_embedding(embedding: int, tied: Sequence[Sequence[int]]) -> int:
    """``embedding`` as a width >= 0 that does not go with tied networks, with a clear error otherwise."""
    if not isinstance(embedding, int) or isinstance(embedding, bool) or embedding < 0:
        raise ValueError(f"the shared embedding must be a width >= 0 (0: none), got {embedding!r}")
    if embedding and tied:
        raise ValueError("a shared embedding cannot go with tied networks: the embedding of x is not "
                         "permuted with a tied group's members, so the group's network would see it in "
                         "different roles")
    return embedding


def check_tied(tied: Sequence[Sequence[int]], views: list[list[int]]) -> list[list[int]]:
    """``tied`` as disjoint lists of at least two coordinate indices whose views have one length,
    with a clear error otherwise."""
    try:
        tied = [[int(j) for j in group] for group in tied]
    except (TypeError, ValueError) as err:
        raise ValueError(f"tied must be lists of integer coordinate indices ({err})") from None
    d, seen = len(views), set()
    for group in tied:
        if len(group) < 2:
            raise ValueError(f"a tied group needs at least two coordinates, got {group}")
        if min(group) < 0 or max(group) >= d:
            raise ValueError(f"tied group {group} has a coordinate outside 0..{d - 1}")
        if seen & set(group) or len(set(group)) < len(group):
            raise ValueError(f"tied groups must be disjoint, without repeats: {tied}")
        seen |= set(group)
        lengths = {len(views[j]) for j in group}
        if len(lengths) > 1:
            raise ValueError(f"the coordinates of a tied group share one network, so their views "
                             f"need one length; group {group} has lengths {sorted(lengths)}")
    return tied


def check_views(views: Sequence[Sequence[int]], theta_dim: int, x_dim: int | None = None) -> list[list[int]]:
    """``views`` as ``d`` lists of ints, with a clear error for a wrong count, an empty view, a
    non-integer index or (when ``x_dim`` is known) an index outside ``[0, x_dim)``."""
    try:
        views = [[int(i) for i in v] for v in views]
    except (TypeError, ValueError) as err:
        raise ValueError(f"score_views must be lists of integer indices ({err})") from None
    if len(views) != theta_dim:
        raise ValueError(f"score_views needs one index list per parameter ({theta_dim}), got {len(views)}")
    empty = [j for j, v in enumerate(views) if not v]
    if empty:
        raise ValueError(f"score_views must be non-empty index lists; empty for parameters {empty}")
    flat = [i for v in views for i in v]
    if x_dim is not None and (min(flat) < 0 or max(flat) >= x_dim):
        raise ValueError(f"score_views index outside the network's data view of length {x_dim}: "
                         f"min {min(flat)}, max {max(flat)}")
    return views
