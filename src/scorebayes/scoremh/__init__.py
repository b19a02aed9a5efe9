r"""Score-based Metropolis-Hastings: learn a score from samples, then an MH acceptance from the score.

Pipeline: samples ``[N, d]`` -> score model
([`score_matching`][scorebayes.scoremh.score_matching]: implicit, sliced or denoising score matching,
noise-conditional for annealing) -> acceptance network (`acceptance_net`)
trained by score balance matching ([`sbm`][scorebayes.scoremh.sbm]) -> MH kernel
([`scorebayes.samplers.mh`][scorebayes.samplers.mh] with [`scorebayes.samplers.proposals`][scorebayes.samplers.proposals] and
[`scorebayes.samplers.acceptance`][scorebayes.samplers.acceptance]). Targets of the paper's experiments:
`datasets`.

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025)
      <https://arxiv.org/abs/2501.00467>
"""

from .acceptance_net import *  # noqa: F403
from .datasets import *  # noqa: F403
from .pipeline import *  # noqa: F403
from .sbm import *  # noqa: F403
from .score_matching import *  # noqa: F403
from .score_models import *  # noqa: F403
