r"""Localization (stage 1 of Langevin SBI): a Gaussian proposal over the unconstrained parameters
from minimum-distance replicates.

- [`minimum_distance`][scorebayes.sbi.localization.minimum_distance]: [`localize()`][scorebayes.sbi.localization.minimum_distance.localize], the replicates and the proposal;
- `search`: the two searches (projected Adam, Nelder-Mead);
- `sliced_wasserstein`: the distance they minimise.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 3.1)
"""

from .minimum_distance import Localization, localize
from .sliced_wasserstein import random_directions, sliced_wasserstein

__all__ = ["Localization", "localize", "random_directions", "sliced_wasserstein"]
