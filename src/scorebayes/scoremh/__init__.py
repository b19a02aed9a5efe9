r"""Score-based Metropolis-Hastings: learn a score from samples, then an MH acceptance from the score.

Pipeline: samples ``[N, d]`` -> score model
(:mod:`~scorebayes.scoremh.score_matching`: implicit, sliced or denoising score matching,
noise-conditional for annealing) -> acceptance network (:mod:`~scorebayes.scoremh.acceptance_net`)
trained by score balance matching (:mod:`~scorebayes.scoremh.sbm`) -> MH kernel
(:mod:`scorebayes.samplers.mh` with :mod:`scorebayes.samplers.proposals` and
:mod:`scorebayes.samplers.acceptance`). Targets of the paper's experiments:
:mod:`~scorebayes.scoremh.datasets`.

References:
    | Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025)
    | https://arxiv.org/abs/2501.00467
"""

from .acceptance_net import *  # noqa: F403
from .datasets import *  # noqa: F403
from .pipeline import *  # noqa: F403
from .sbm import *  # noqa: F403
from .score_matching import *  # noqa: F403
from .score_models import *  # noqa: F403
