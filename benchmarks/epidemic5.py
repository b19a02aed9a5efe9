r"""Epidemic (SI) benchmark, setting 1 (5 floors): Tables 3 and 7 and Fig. 5 (Sec. 5.3, App. C.3).

Methods: ``n-model`` (the paper's plain full-data score network on vec(S): ``ScoreLangevin``
``mode="full"``, ELU 512-256-128, no regularization), ``abc`` (exact W1 between the rows of S,
keep 100), ``bsl`` (mean/SD of the rows of S), ``npe`` (MAF via ``sbi`` on flattened S) and
``gaussian-npe`` (Chatha et al.'s Gaussian NPE, the paper's NPE row). Setting 1 draws every table
from the prior; setting 2 (``epidemic10.py``, which imports :func:`main` from here) localizes and
draws from :math:`q`, reweighting the baselines by :math:`\pi/q`.

Run: ``scorebayes bench epidemic5 [--reps R] [--methods a,b] [--full]``.

References:
    | Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang, Yang)
    | Sec. 5.3, App. C.3, Tables 3, 6, 7, 8, Figs. 5 and 10; seeds/000_1aaaaf87072c12bc.txt
    | Chatha et al., Neural posterior estimation for stochastic epidemic modeling, 2024
"""

from __future__ import annotations

import functools
import hashlib
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sbi_common as common  # noqa: E402

from scorebayes.baselines import abc_w1, bsl, gaussian_npe, npe  # noqa: E402
from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import derive_seed, make_generator  # noqa: E402
from scorebayes.sbi import ScoreLangevin, TrainingSchedule  # noqa: E402

METHODS = ["n-model", "abc", "bsl", "npe", "gaussian-npe"]
PAPER_KEYS = ["abc", "bsl", "gaussian-npe", "n-model"]  # column order of Tables 3 and 6
# the n-model trained at the paper's scale (table size and epochs), sampled at the small scale;
# first repetitions only (about 11 min each on one core)
PAPER_TRAINING = "n-model-paper-training"
# beyond the paper: the paper-training n-model with one small network per rate, each seeing the
# facility column and its own column of S (Epidemic.score_views; scorebayes CoordinateViewScoreNet)
VIEWS = "n-model-views"
# the same with the facility and room rates' networks seeing all of S: telling facility-wide from
# floor transmission needs the infections' spread over the floors (Epidemic.score_views(see_all=))
VIEWS_WIDE = "n-model-views-wide"
# every rate's network also sees per-time summaries of how the infections spread over the floors
# (Epidemic.floor_spread through ScoreLangevin(data_features=), Epidemic.score_views(spread=True))
VIEWS_SPREAD = "n-model-views-spread"
# the same summaries for the facility and floor rates only: they inform how transmission splits
# between the facility and the floors, not the room rate (whose width grew with them)
VIEWS_SPREAD_FLOORS = "n-model-views-spread-floors"
# VIEWS_SPREAD with one network shared by the floor rates (exchangeable floors: permuting their
# rates permutes their columns of S; Epidemic.exchangeable_rates, ScoreLangevin(tied_views=)):
# every table row teaches it once per floor
VIEWS_SPREAD_TIED = "n-model-views-spread-tied"
# VIEWS_SPREAD on a table of 5x the paper's simulations, trained for the same number of gradient
# steps (epochs scaled down 5x): the per-rate networks' validation loss turns up after a few passes
# over 20,000 rows, so the placement along the facility-floor ridge may be the table's noise
VIEWS_SPREAD_5X = "n-model-views-spread-5x"
# VIEWS_SPREAD with one embedding of all of S, trained jointly with the per-rate networks and
# appended to every rate's view (ScoreLangevin(shared_embedding=k)): a view that misses some of a
# rate's information makes the chains sample a composite law, not the posterior (note WHAT A
# PER-RATE VIEW LEARNS); the embedding gives every rate all of S through a few learned numbers
VIEWS_SPREAD_EMBED = "n-model-views-spread-embed"
# VIEWS (no spread summaries) with the shared embedding: on VIEWS's repetition seeds
VIEWS_EMBED = "n-model-views-embed"
# BSL at the paper's chains and simulations per iteration (FULL["bsl"]) on the first repetitions:
# at the small scale (4 x 300 steps, 50 simulations for a 24-number summary) BSL is too narrow
BSL_PAPER = "bsl-paper-scale"
# the tied and 5x variants on VIEWS_SPREAD's repetition seeds (its localization and table seed):
# each differs from that row by one thing (the shared floor network; the table's size)
SEED_AS = {VIEWS_SPREAD_TIED: VIEWS_SPREAD, VIEWS_SPREAD_5X: VIEWS_SPREAD, VIEWS_SPREAD_EMBED: VIEWS_SPREAD,
           VIEWS_EMBED: VIEWS}
VARIANT_SCALES = {PAPER_TRAINING: "paper_training", VIEWS: "views", VIEWS_WIDE: "views_wide",
                  VIEWS_SPREAD: "views_spread", VIEWS_SPREAD_FLOORS: "views_spread_floors",
                  VIEWS_SPREAD_TIED: "views_spread_tied",
                  VIEWS_SPREAD_5X: "views_spread_5x", VIEWS_SPREAD_EMBED: "views_spread_embed",
                  VIEWS_EMBED: "views_embed", BSL_PAPER: "bsl_paper"}  # variant -> its key in SMALL
N_MODEL_VARIANTS = (PAPER_TRAINING, VIEWS, VIEWS_WIDE, VIEWS_SPREAD, VIEWS_SPREAD_FLOORS, VIEWS_SPREAD_TIED,
                    VIEWS_SPREAD_5X, VIEWS_SPREAD_EMBED, VIEWS_EMBED)


def _paper_rows(rows: dict[str, tuple], cost: dict) -> dict:
    """``{param: (bias4, bias_sd4, width4, width_sd4, cov4)}`` -> ``{method: {param: 5-tuple}}``."""
    out: dict = {m: {} for m in PAPER_KEYS}
    for p, (b, bs, w, ws, c) in rows.items():
        for j, m in enumerate(PAPER_KEYS):
            out[m][p] = (b[j], bs[j], w[j], ws[j], c[j])
    out["npe"] = out["gaussian-npe"]  # the paper's NPE row is the Gaussian NPE
    # each variant is compared with its method's row: BSL's, or the n-model's
    base = {variant: "bsl" if variant == BSL_PAPER else "n-model" for variant in VARIANT_SCALES}
    for variant, method in base.items():
        out[variant] = out[method]
    out["cost"] = {**cost, **{variant: cost[method] for variant, method in base.items()}}
    return out


# Table 3 (setting 1, 100 repetitions), columns ABC / BSL / NPE / n-model
TABLE3 = {
    "beta_facility": ((.009, .010, .009, .010), (.006, .007, .007, .008), (.085, .081, .108, .066),
                      (.013, .037, .054, .009), (1.0, 1.0, 1.0, .98)),
    "beta_floor1": ((.018, .016, .022, .014), (.008, .012, .015, .013), (.092, .094, .143, .074),
                    (.021, .065, .042, .021), (1.0, 1.0, 1.0, .98)),
    "beta_floor2": ((.009, .011, .020, .014), (.009, .009, .021, .013), (.106, .105, .193, .090),
                    (.027, .050, .122, .027), (1.0, 1.0, 1.0, 1.0)),
    "beta_floor3": ((.013, .016, .015, .016), (.009, .011, .014, .012), (.123, .125, .199, .104),
                    (.031, .092, .114, .026), (1.0, 1.0, 1.0, 1.0)),
    "beta_floor4": ((.023, .023, .025, .023), (.015, .016, .025, .017), (.148, .131, .218, .126),
                    (.052, .040, .148, .037), (.99, .97, 1.0, .98)),
    "beta_floor5": ((.028, .026, .030, .025), (.017, .018, .019, .019), (.179, .165, .211, .138),
                    (.054, .071, .071, .033), (.98, .98, .99, .96)),
    "beta_room": ((.014, .016, .013, .015), (.009, .015, .010, .012), (.204, .133, .216, .123),
                  (.048, .051, .098, .039), (1.0, 1.0, 1.0, 1.0)),
}
COST7 = {"abc": 8e3, "bsl": 1e6, "npe": 8e3, "gaussian-npe": 8e3, "n-model": 8e3}

# n-model "validation": the share of the table held out for early stopping. The paper's 50/50 split
# belongs to the single-model protocol (it chooses the curvature penalty); its epidemic n-model is
# plain training without a penalty. With 10% held out the net trains on 90% of the same simulations:
# 8 paired repetitions at the paper's scale narrowed floors 2-5 and the room rate by
# 8-22% against a 50% split, coverage unchanged
N_MODEL_VALIDATION = 0.1
#: the paper's BSL for setting 1 (App. C.3: 10 chains x 1,000 iterations, 200 burn-in, 100 simulations)
PAPER_BSL = {"chains": 10, "length": 1_000, "burn_in": 200, "sims": 100}
SMALL = {
    "reps": 20,  # the suggested number for this benchmark
    "n": {"N": 2_000, "epochs": 30, "batch": 5, "samples": 1_000, "max_steps": 2_000, "validation": N_MODEL_VALIDATION},
    "abc": {"N": 8_000, "k": 100},
    "bsl": {"chains": 4, "length": 300, "burn_in": 100, "sims": 50},
    "npe": {"N": 2_000, "samples": 2_000, "epochs": 200},
    "gnpe": {"N": 8_000, "samples": 5_000, "epochs": 300},
    "localization": {"replicates": 20, "iterations": 100, "lr": 1e-1},
    "paper_training": {"N": 8_000, "epochs": 100, "batch": 5, "samples": 1_000, "max_steps": 2_000,
                       "validation": N_MODEL_VALIDATION, "reps": 20},
    # the random walk's covariance adapted in burn-in, as for the monotone regression's BSL
    "bsl_paper": {**PAPER_BSL, "adapt_covariance": True, "reps": 3},
}
FULL = {
    "reps": 100,
    "n": {"N": 8_000, "epochs": 100, "batch": 5, "samples": 10_000, "max_steps": 20_000,
          "validation": N_MODEL_VALIDATION},
    "abc": {"N": 8_000, "k": 100},
    "bsl": PAPER_BSL,
    "npe": {"N": 8_000, "samples": 10_000, "epochs": 1_000},
    "gnpe": {"N": 8_000, "samples": 10_000, "epochs": 1_000},
    "localization": {"replicates": 100, "iterations": 100, "lr": 1e-1},
}


def flatten_summary(x: torch.Tensor) -> torch.Tensor:
    """``S [B, T, J+2] -> vec(S) [B, T (J+2)]`` (the NPE input)."""
    return x.reshape(x.shape[0], -1)


def n_estimator(model, s: dict, localization: dict, seed: int, *, localize: bool = True) -> ScoreLangevin:
    """The (unfitted) n-model of settings ``s`` (a ``SMALL``/``FULL`` entry): full-data score
    matching (``mode="full"``) on a table of ``s["N"]`` data sets from the localized proposal,
    with ``s["views"]`` (True: each rate's two columns of S; or the names of the rates that see
    all of S) and ``s["spread"]`` (True: every view; or the names of the rates whose views also
    see the floor-spread summaries, appended to vec(S)); ``s["tied"]``: the floor rates share one
    network (Epidemic.exchangeable_rates); ``s["embedding"]``: the width of a shared embedding of
    the whole view appended to every rate's (default 0, none); ``s["coordinates"]``: the networks'
    input, ``"unconstrained"`` (default, u = log theta) or ``"constrained"`` (theta, as the paper's)."""
    views = s.get("views")
    spread = s.get("spread") or False
    views = (model.score_views(spread=spread) if views is True
             else model.score_views(see_all=views, spread=spread)) if views else None
    return ScoreLangevin.from_options(
        model.prior, model.simulator, preset="paper", mode="full", localize=localize, localization=localization,
        table_size=s["N"], hidden=s.get("hidden", (512, 256, 128)), activation="elu",
        score_views=views, data_features=model.floor_spread if spread else None,
        tied_views=model.exchangeable_rates() if s.get("tied") else (),
        shared_embedding=s.get("embedding", 0), network_coordinates=s.get("coordinates", "unconstrained"),
        schedule=TrainingSchedule(epochs=s["epochs"], penalty_epochs=0, batch_size=s["batch"],
                                  lr=s.get("lr", (1e-4, 1e-5)), validation_fraction=s["validation"]),
        curvature_penalties=(0.0,), parameter_names=model.parameter_names, seed=seed, progress=False)


def make_methods(model, scale: dict, chosen: list[str], *, localize: bool, seed: int) -> dict:
    """``{method: fn(x_obs [T, J+2], seed) -> Posterior}``; with ``localize`` the baselines share
    one localization per observed data set (cost in ``info["cost_localization"]``)."""
    from scorebayes.sbi.localization.minimum_distance import localize as run_localization

    prior, sim, names = model.prior, model.simulator, model.parameter_names
    cache: dict[str, object] = {}

    def proposal(x_obs):
        if not localize:
            return None, 0.0
        key = hashlib.sha1(x_obs.numpy().tobytes()).hexdigest()
        if key not in cache:
            cache.clear()
            cache[key] = run_localization(sim, x_obs, prior, seed=derive_seed(seed, "localize", key),
                                          **scale["localization"])
        loc = cache[key]
        return loc.proposal, float(loc.simulations)

    def tag(post, loc_cost):
        post.info["cost_localization"] = loc_cost
        return post

    def nmodel(x_obs, s_, key="n"):
        s = scale[key]
        est = n_estimator(model, s, scale["localization"], s_, localize=localize)
        return est.fit(x_obs).sample(s["samples"], chains=s["samples"], max_steps=s["max_steps"], remedy=False)

    def abc(x_obs, s_):
        q, c = proposal(x_obs)
        return tag(abc_w1(x_obs, prior, simulator=sim, num_simulations=scale["abc"]["N"], sampler=q,
                          k=scale["abc"]["k"], names=names, generator=make_generator(s_, "abc")), c)

    def bsl_fn(x_obs, s_, key="bsl"):
        s = scale[key]
        q, c = proposal(x_obs)
        init = None
        if q is None:  # prior tables: start at the best prior draws by synthetic likelihood
            init, pilot = common.bsl_pilot_init(
                x_obs, sim, prior, model.summary_fn, num_chains=s["chains"], candidates=5 * s["chains"],
                num_sims=s["sims"], generator=make_generator(s_, "bsl", "pilot"))
            c = c + pilot
        return tag(bsl(x_obs, sim, prior, summary=model.summary_fn, num_chains=s["chains"],
                       num_steps=s["length"], burn_in=s["burn_in"], num_sims=s["sims"], sampler=q,
                       init=init, adapt_covariance=s.get("adapt_covariance"), names=names,
                       generator=make_generator(s_, "bsl")), c)

    def npe_fn(x_obs, s_):
        s = scale["npe"]
        q, c = proposal(x_obs)
        return tag(npe(x_obs, prior, simulator=sim, num_simulations=s["N"], sampler=q,
                       summary=flatten_summary, num_samples=s["samples"], max_epochs=s["epochs"],
                       names=names, generator=make_generator(s_, "npe")), c)

    def gnpe_fn(x_obs, s_):
        s = scale["gnpe"]
        q, c = proposal(x_obs)
        return tag(gaussian_npe(x_obs, prior, simulator=sim, num_simulations=s["N"], sampler=q,
                                summary=flatten_summary, num_samples=s["samples"],
                                max_epochs=s["epochs"], names=names,
                                generator=make_generator(s_, "gnpe")), c)

    table = {"n-model": nmodel, "abc": abc, "bsl": bsl_fn, "npe": npe_fn, "gaussian-npe": gnpe_fn,
             **{variant: functools.partial(nmodel, key=VARIANT_SCALES[variant]) for variant in N_MODEL_VARIANTS},
             BSL_PAPER: functools.partial(bsl_fn, key=VARIANT_SCALES[BSL_PAPER])}
    return {m: table[m] for m in chosen}


def figure(model, name: str, records: list[dict], fig_name: str) -> list[str]:
    """Figs. 5/10: per-parameter CI95 width and bias of every method (ours), truth-relative."""
    plt = common.pyplot()
    methods = list(dict.fromkeys(r["method"] for r in records))
    d = model.dim
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    for j, m in enumerate(methods):
        rows = [r for r in records if r["method"] == m]
        w = torch.tensor([r["width"] for r in rows]).mean(0)
        b = torch.tensor([r["bias"] for r in rows]).mean(0)
        xs = torch.arange(d) + (j - len(methods) / 2) * 0.12
        axes[0].plot(xs, w, "o", label=m)
        axes[1].plot(xs, b, "o", label=m)
    for ax, t in zip(axes, ("mean CI95 width", "mean |bias|")):
        ax.set_xticks(range(d))
        ax.set_xticklabels(model.reported_names, rotation=45, fontsize=7)
        ax.set_title(t)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(common.RESULTS / fig_name, dpi=110)
    plt.close(fig)
    return [fig_name]


def _fingerprinted(small: dict, scale: dict, variants: list[str]) -> dict[str, dict]:
    """Settings whose change must re-run a method's stored records: the per-rate variants' and
    the paper-scale BSL's (fingerprinted; the other methods' records
    predate fingerprints)."""
    out = {}
    for variant in (*(v for v in N_MODEL_VARIANTS if v != PAPER_TRAINING), BSL_PAPER):
        if variant in variants:
            settings = {k: v for k, v in small[VARIANT_SCALES[variant]].items() if k != "reps"}
            out[variant] = {**settings, "localization": scale.get("localization")}
    return out


ANCHOR = "gaussian-npe"  # the paper's NPE row is this method; it is cheap and runs on every repetition


def _anchored_widths(records: list[dict], paper: dict | None, reps: int, names: list[str],
                     methods: list[str]) -> list[str]:
    r"""Widths with the repetitions' difficulty divided out, one note line per method.

    With few repetitions, the mean width depends on which data sets were drawn. The anchor
    (``ANCHOR``, the method of the paper's NPE row) runs on every repetition, so on the repetitions
    method :math:`m` ran on, :math:`a_p = \bar w_{\text{anchor},p} / w^{\text{paper}}_{\text{NPE},p}`
    measures how wide those data sets are, and

    .. math:: r_{m,p} = \frac{\bar w_{m,p} / \bar w_{\text{anchor},p}}
                             {w^{\text{paper}}_{m,p} / w^{\text{paper}}_{\text{NPE},p}}

    is method :math:`m`'s width against the paper's row after dividing that out (1 = the paper's
    ratio to NPE). :math:`a_p` also carries any difference between our anchor and the paper's (on
    ``epidemic5``'s 20 repetitions ours is 0.68-0.84x), so this is a second view beside the plain
    ratio, not a replacement. Means over the common repetitions; no line without the anchor or the
    paper.
    """
    if not paper or ANCHOR not in paper:
        return []
    anchor_reps = {r["rep"]: r for r in records if r["method"] == ANCHOR and r["rep"] < reps}
    if not anchor_reps:
        return []
    paper_npe = torch.tensor([paper[ANCHOR][p][2] for p in names], dtype=torch.float64)
    lines = []
    for method in methods:
        if method not in paper or method == ANCHOR:
            continue
        rows = [r for r in records if r["method"] == method and r["rep"] in anchor_reps]
        if not rows:
            continue
        w = torch.tensor([r["width"] for r in rows], dtype=torch.float64).mean(0)
        a = torch.tensor([anchor_reps[r["rep"]]["width"] for r in rows], dtype=torch.float64).mean(0)
        paper_w = torch.tensor([paper[method][p][2] for p in names], dtype=torch.float64)
        ratio = (w / a) / (paper_w / paper_npe)
        lines.append(
            f"ANCHORED WIDTHS, {method} ({len(rows)} repetition{'s' if len(rows) > 1 else ''}): on these "
            f"repetitions {ANCHOR}'s widths are "
            + " / ".join(f"{v:.2f}" for v in (a / paper_npe).tolist())
            + "x the paper's NPE row (this mixes how wide these data sets are with how our Gaussian NPE "
            "differs from the paper's); "
            f"{method}'s widths over {ANCHOR}'s, divided by the paper's {method} over NPE: "
            + " / ".join(f"{v:.2f}" for v in ratio.tolist()) + " (parameter order; 1 = the paper's ratio).")
    return lines


def chance_of_a_short_rate(reps: int, rates: int, nominal: float = 0.95, floor: float = 0.90) -> float:
    r"""Probability that a posterior whose intervals cover with probability ``nominal`` shows an
    observed coverage below ``floor`` on at least one of ``rates`` parameters over ``reps``
    repetitions (rates independent): :math:`1 - P(K \ge \lceil f R \rceil)^P`,
    :math:`K \sim \text{Bin}(R, \text{nominal})`. Shows how often the coverage part of the
    targets fails by chance alone."""
    need = math.ceil(floor * reps - 1e-9)
    enough = sum(math.comb(reps, k) * nominal**k * (1 - nominal) ** (reps - k) for k in range(need, reps + 1))
    return 1.0 - enough**rates


def _target_check(records: list[dict], paper: dict | None, reps: int, names: list[str],
                  methods: list[str], margin: float = 1.1, floor: float = 0.90) -> list[str]:
    r"""Tables 3 and 6's n-model target, with its Monte Carlo error, one note line per method.

    On the repetitions method :math:`m` ran on, the mean width ratio
    :math:`\bar r_p = \overline{w_{m,p}} / w^{\text{paper}}_p` and its standard error over
    repetitions :math:`\text{se}_p`; a rate misses the width target when
    :math:`\bar r_p > 1.1`, and by more than the Monte Carlo error when
    :math:`(\bar r_p - 1.1)/\text{se}_p > 2`. Coverage below 0.90 is listed with
    :func:`chance_of_a_short_rate`, the chance of that for a posterior that covers exactly 95%.
    """
    if not paper or "n-model" not in paper:
        return []
    paper_w = torch.tensor([paper["n-model"][p][2] for p in names], dtype=torch.float64)
    lines = []
    for method in methods:
        rows = [r for r in records if r["method"] == method and r["rep"] < reps]
        if len(rows) < 2:
            continue
        ratio = torch.tensor([r["width"] for r in rows], dtype=torch.float64) / paper_w
        mean, se = ratio.mean(0), ratio.std(0) / math.sqrt(len(rows))
        z = (mean - margin) / se
        covered = torch.tensor([r["covers"] for r in rows], dtype=torch.float64).sum(0)
        wide = [f"{n} {mean[k]:.2f} ({z[k]:+.1f} se)" for k, n in enumerate(names) if mean[k] > margin]
        clear = [n for k, n in enumerate(names) if z[k] > 2]
        short = [f"{n} {int(covered[k])}" for k, n in enumerate(names) if covered[k] < floor * len(rows) - 1e-9]
        lines.append(
            f"TARGET CHECK, {method} ({len(rows)} repetitions; the n-model target is a mean CI95 width at "
            f"most {margin:g}x the paper's and coverage >= {floor:.2f} on every parameter): "
            + (f"width above {margin:g}x on {len(wide)} of {len(names)} parameters ("
               + ", ".join(wide) + "; in brackets (ratio - " + f"{margin:g}) / its standard error), "
               + (f"by more than 2 standard errors on {len(clear)} (" + ", ".join(clear) + ")"
                  if clear else "none by more than 2 standard errors")
               if wide else f"every width within {margin:g}x")
            + "; " + (f"coverage below {floor:.2f} on {len(short)} (" + ", ".join(short) + f" of {len(rows)})"
                      if short else f"coverage >= {floor:.2f} on every parameter")
            + f". A posterior covering exactly 95% shows coverage below {floor:.2f} on at least one of "
            f"{len(names)} parameters over {len(rows)} repetitions with probability "
            f"{chance_of_a_short_rate(len(rows), len(names), floor=floor):.2f} (binomial, parameters independent).")
    return lines


def _spread_rates(names: list[str]) -> list[str]:
    """Names for a note, runs of floors shortened: beta_floor1 .. beta_floor10 -> floors 1-10."""
    floors = [int(n.removeprefix("beta_floor")) for n in names if n.startswith("beta_floor")]
    others = [n for n in names if not n.startswith("beta_floor")]
    run = (f"floors {floors[0]}-{floors[-1]}" if floors == list(range(floors[0], floors[-1] + 1))
           else "floors " + ", ".join(map(str, floors))) if floors else None
    return others + ([run] if run else [])


def _views_settings(views: dict, reps: int) -> str:
    """A per-rate variant's learning rate and repetitions, for its note line."""
    lr = " -> ".join(f"{v:g}" for v in views.get("lr", (1e-4, 1e-5)))
    return f"learning rate {lr}; " + _variant_repetitions(views.get("reps", 0), reps) + "."


def _variant_repetitions(variant_reps: int | tuple[int, ...], reps: int) -> str:
    """Which repetitions a variant ran on: its ``reps`` caps the benchmark's (a count: the first
    ones; a tuple: those repetitions)."""
    if isinstance(variant_reps, tuple):
        return "repetitions " + ", ".join(str(r) for r in variant_reps if r < reps) + " only"
    if variant_reps >= reps:
        return "every repetition"
    return "first repetition only" if variant_reps == 1 else f"first {variant_reps} repetitions only"


def _same_repetitions(records: list[dict], paper: dict | None, reps: int, names: list[str],
                      variants: list[str]) -> list[str]:
    """Mean CI95 widths of the n-model and the variants over the variants' repetitions, and their
    ratios to the paper's n-model widths: one note line per distinct set of repetitions (none
    for a set the n-model did not run on in full)."""
    runs_of = {v: frozenset(r["rep"] for r in records if r["method"] == v and r["rep"] < reps)
               for v in variants}
    paper_w = torch.tensor([paper["n-model"][p][2] for p in names]) if paper else None
    lines = []
    for kept in dict.fromkeys(k for k in runs_of.values() if k):
        parts = []
        for label in ("n-model", *(v for v in variants if runs_of[v] == kept)):
            rows = [r for r in records if r["method"] == label and r["rep"] in kept]
            if len(rows) != len(kept):
                break  # the n-model is missing some of these repetitions
            w = torch.tensor([r["width"] for r in rows], dtype=torch.float64).mean(0)
            text = f"{label} " + " / ".join(f"{v:.3f}" for v in w.tolist())
            if paper_w is not None:
                text += " (x paper: " + " / ".join(f"{v:.2f}" for v in (w / paper_w).tolist()) + ")"
            parts.append(text)
        else:
            lines.append(f"Same {len(kept)} repetitions, mean CI95 widths in parameter order: "
                         + "; ".join(parts) + ".")
    return lines


def main(name: str = "epidemic5", *, paper: dict | None = None, small: dict = SMALL, full: dict = FULL,
         localize: bool = False, fig_name: str = "epidemic5_fig5.png", extra_notes: tuple[str, ...] = (),
         argv=None) -> None:
    variants = [m for m, key in VARIANT_SCALES.items() if key in small]
    args = common.parse_args(f"{name} benchmark", small["reps"], [*METHODS, *variants], argv,
                             only_reps=True, plan=True)
    scale = full if args.full else small
    if args.full:  # the n-model already trains, and BSL runs, at the paper's scale
        args.methods = [m for m in args.methods if m not in variants]
    model = get_model(name)
    methods = make_methods(model, scale, args.methods, localize=localize, seed=args.seed)
    start = time.perf_counter()
    caps = {m: small[VARIANT_SCALES[m]]["reps"] for m in variants}
    records = common.run_repetitions(name, model, methods, reps=args.reps, seed=args.seed,
                                     fresh=args.fresh, progress=not args.quiet, max_reps=caps,
                                     configs=_fingerprinted(small, scale, variants),
                                     seed_as=SEED_AS,
                                     only_reps=args.only_reps, plan=args.plan)
    if args.only_reps is not None:
        if not records:  # every chosen method is capped below these repetitions
            chosen_caps = {m: k for m, k in caps.items() if m in args.methods}
            print(f"nothing ran: repetitions {args.only_reps} are beyond the methods' caps {chosen_caps}")
        else:
            print(f"recorded repetitions {args.only_reps}; render with: scorebayes bench {name} --reps R")
        return
    summary = common.summarise(records, model.reported_names, reps=args.reps)
    figures = figure(model, name, [r for r in records if r["rep"] < args.reps], fig_name)
    seconds = max(time.perf_counter() - start, sum(r["seconds"] for r in records if r["rep"] < args.reps))
    scale_note = common.scale_note(scale, args.reps, args.full)
    pt, bp = small.get("paper_training", {}), small.get("bsl_paper", {})
    notes = [
        "Cost unit: one simulated summary matrix S (T = 52 rows). n-model, ABC, NPE: N; BSL: chains x "
        "length x simulations per iteration; localization reported separately.",
        "n-model = ScoreLangevin.from_options(mode='full'): the paper's full-data score network on vec(S).",
        "The paper's NPE row is Chatha et al.'s Gaussian NPE (our 'gaussian-npe'); 'npe' is the MAF of sbi.",
        *([f"{PAPER_TRAINING}: the n-model at the paper's training scale (N = {pt['N']:,} summary matrices, "
           f"{pt['epochs']} epochs, batch {pt['batch']}: the paper's cost "
           + f"{pt['N']:.0e}".replace("e+0", "e") + "), sampled like the "
           f"small-scale n-model ({pt['samples']:,} chains, at most {pt['max_steps']:,} steps); "
           + _variant_repetitions(pt.get("reps", 0), args.reps)
           + "; compare with the n-model's rows over the same repetitions in the notes below."]
          if PAPER_TRAINING in variants and not args.full else []),
        *([f"{VIEWS}: {PAPER_TRAINING} with one network per rate ({small['views']['hidden']} hidden ELU units "
           "each) that sees all rates and only the facility column and the rate's own column of S (floor j's "
           "prevalence; the room column for the room rate and the facility rate): "
           "ScoreLangevin(score_views=model.score_views()), beyond the paper; "
           + _views_settings(small["views"], args.reps)]
          if VIEWS in variants and not args.full else []),
        *([f"{VIEWS_WIDE}: {VIEWS} with the networks of "
           + " and ".join(small["views_wide"]["views"]) + " seeing all of S "
           "(ScoreLangevin(score_views=model.score_views(see_all=...))): telling facility-wide from floor "
           "transmission needs how the infections spread over the floors; "
           + _views_settings(small["views_wide"], args.reps)]
          if VIEWS_WIDE in variants and not args.full else []),
        *([f"{VIEWS_SPREAD}: {VIEWS} with every rate's network also seeing 4 per-time summaries of the floors' "
           "prevalences (SD, max and min over the floors, and the covariance over the floors of each floor's "
           "increment with its previous prevalence): ScoreLangevin(data_features=model.floor_spread, "
           "score_views=model.score_views(spread=True)), beyond the paper; facility-wide transmission lifts "
           "every floor alike, floor transmission grows each floor in proportion to its own prevalence; "
           + _views_settings(small["views_spread"], args.reps)]
          if VIEWS_SPREAD in variants and not args.full else []),
        *([f"{VIEWS_SPREAD_FLOORS}: {VIEWS_SPREAD} with the summaries in the views of "
           + ", ".join(_spread_rates(small["views_spread_floors"]["spread"])) + " only "
           "(ScoreLangevin(score_views=model.score_views(spread=names))): they tell facility-wide from floor "
           "transmission, not room transmission; " + _views_settings(small["views_spread_floors"], args.reps)]
          if VIEWS_SPREAD_FLOORS in variants and not args.full else []),
        *([f"{VIEWS_SPREAD_TIED}: {VIEWS_SPREAD} with one network shared by the floor rates "
           "(ScoreLangevin(tied_views=model.exchangeable_rates())): the floors are exchangeable (equal "
           "sizes, roommates on one floor), so floor j's score is one function of its own rate, the other "
           "floors' rates in cyclic order from j, the facility and room rates, the facility column and "
           "floor j's column (and the spread summaries); each table row then trains it once per floor, "
           "beyond the paper; " + _views_settings(small["views_spread_tied"], args.reps)]
          if VIEWS_SPREAD_TIED in variants and not args.full else []),
        *([f"{VIEWS_SPREAD_5X}: {VIEWS_SPREAD} on a table of N = {small['views_spread_5x']['N']:,} summary "
           f"matrices ({small['views_spread_5x']['N'] // small['views_spread']['N']}x the paper's simulations) "
           f"from the same localized q, trained for {small['views_spread_5x']['epochs']} epochs at batch "
           f"{small['views_spread_5x']['batch']} (the paper's number of gradient steps), on {VIEWS_SPREAD}'s "
           "repetition seeds, beyond the paper; " + _views_settings(small["views_spread_5x"], args.reps)]
          if VIEWS_SPREAD_5X in variants and not args.full else []),
        *([f"{VIEWS_SPREAD_EMBED}: {VIEWS_SPREAD} with one embedding of the whole view (vec(S) and the "
           f"summaries) into {small['views_spread_embed']['embedding']} numbers, an MLP trained jointly with "
           "the per-rate networks and appended to every rate's view (ScoreLangevin(shared_embedding=k)): a "
           "view that misses some of a rate's information makes the chains sample a composite law, not the "
           f"posterior; on {VIEWS_SPREAD}'s repetition seeds, beyond the paper; "
           + _views_settings(small["views_spread_embed"], args.reps)]
          if VIEWS_SPREAD_EMBED in variants and not args.full else []),
        *([f"{VIEWS_EMBED}: {VIEWS} with the shared embedding of {VIEWS_SPREAD_EMBED} (of vec(S), "
           f"{small['views_embed']['embedding']} numbers), on {VIEWS}'s repetition seeds, beyond the paper; "
           + _views_settings(small["views_embed"], args.reps)]
          if VIEWS_EMBED in variants and not args.full else []),
        *([f"{BSL_PAPER}: BSL with the paper's chains and simulations per iteration ({bp['chains']} chains x "
           f"{bp['length']:,} iterations, {bp['burn_in']} burn-in, {bp['sims']} simulations: cost "
           + f"{bp['chains'] * bp['length'] * bp['sims']:.0e}".replace("e+0", "e") + "), the random walk's "
           "covariance adapted in burn-in (bsl(adapt_covariance=True)), from the same localized q; "
           + _variant_repetitions(bp.get("reps", 0), args.reps) + "."]
          if BSL_PAPER in variants and not args.full else []),
        *_same_repetitions(records, paper, args.reps, model.reported_names,
                           [v for v in variants if v in N_MODEL_VARIANTS]),
        *_anchored_widths(records, paper, args.reps, model.reported_names, ["n-model", *variants]),
        *_target_check(records, paper, args.reps, model.reported_names,
                       ["n-model", *(v for v in variants if v in N_MODEL_VARIANTS)]),
        *extra_notes,
    ]
    common.write_results(name, command=common.command_line(name), reps=args.reps, methods=summary,
                         paper=paper, scale_note=scale_note, notes=notes, figures=figures, seconds=seconds)
    print(f"wrote {common.RESULTS / (name + '.json')}")


PAPER = _paper_rows(TABLE3, COST7)

if __name__ == "__main__":
    main("epidemic5", paper=PAPER, localize=False, extra_notes=(
        "TABLE 3 n-model: MET AT THE PAPER'S TRAINING SCALE, ON 20 REPETITIONS. n-model-paper-training "
        "(N = 8,000, 100 epochs, batch 5: the paper's cost; 10% of the table held out for early "
        "stopping), 20 repetitions: every CI95 width within the paper's + 10% (0.92-1.02x, ratios in "
        "the line above; standard errors 0.02-0.06), coverage 139 of 140 (floor 5 19 of 20, the others "
        "20 of 20). The first 10 gave (0.88-1.05x, 70 of 70), with floor 5 the tight "
        "one at 1.05x (SE 0.05); repetitions 10-19, run with the same code, give "
        "0.88-1.01x and 69 of 70, floor 5 0.88x, so its margin on 20 is 0.97x (SE 0.04). At the small "
        "scale (the 'n-model' row: N = 2,000, 30 epochs) the widths are 1.14-1.67x the paper's, "
        "covering 140 of 140.",
        "BSL AT THE PAPER'S SCALE (`scorebayes bench epidemic5 --only-reps 0,1 --methods "
        "bsl-paper-scale`, then `--only-reps 2`; 9-17 min a repetition on one core). On repetitions "
        "0-2 the paper's BSL (10 chains x 1,000 iterations, 200 burn-in, 100 simulations per "
        "iteration: cost 1e6, the random walk's covariance adapted in burn-in) gives widths 1.09 / "
        "0.68 / 1.14 / 1.00 / 1.10 / 0.77 / 1.40x the paper's BSL row (facility / floors 1-5 / room; "
        "single repetitions 0.44-1.65x), 21 of 21 intervals covering; the small-scale BSL (4 x 300 "
        "iterations, 50 simulations) on the same data sets gives 0.91 / 0.66 / 0.74 / 0.58 / 0.57 / "
        "0.77 / 1.00x and 18 of 21 (on 20 repetitions 0.65-0.90x, 112 of 140). So, as in setting 2, "
        "the small-scale BSL row's narrowness and undercoverage are its scale: at the paper's scale "
        "the row is near the paper's and covers fully (three repetitions: standard errors of these "
        "ratios 0.08-0.27).",
        "WHAT CLOSED MOST OF THE GAP: the held-out share. With the single-model protocol's 50% split "
        "they gave 1.03 / 0.89 / 1.25 / 1.09 / 1.23 / 1.47 / 1.07x the paper's widths; holding out 10% "
        "narrows floors 2-5 and the room rate by 8-22% (paired per repetition, standard errors "
        "0.03-0.07) and leaves the facility rate and floor 1 unchanged; holding out 5% gives the same "
        "within error (1.03 / 0.87 / 1.00 / 0.91 / 1.02 / 1.14 / 0.97x). The net was limited by the "
        "simulations it trained on, not by training time (below). Runs are bit-reproducible on one "
        "machine; repetition 0 run on another machine differed by up to 1% in the widths "
        "(floating-point kernels).",
        "Earlier checks, all with the 50% split: the sampler is not the cause: on repetition 0, 5,000 "
        "and 20,000 burn-in steps give the same widths as the automatic 651 (small net) and 1,000 "
        "(paper-scale net) within Monte Carlo error. Nor does a second table round help at the same "
        "total cost (4,000 prior tables, then 4,000 from a Gaussian fitted in log beta to round 1's "
        "draws, x 2): repetition 0 went from 0.062 / 0.060 / 0.211 / 0.152 / 0.223 / 0.251 / 0.178 to "
        "0.048 / 0.131 / 0.170 / 0.212 / 0.187 / 0.204 / 0.252. Widths vary with the training seed: "
        "repetition 0 trained at the paper's scale with two seeds gave 0.058 / 0.052 / 0.194 / 0.183 / "
        "0.164 / 0.224 / 0.204 and 0.071 / 0.051 / 0.121 / 0.154 / 0.194 / 0.145 / 0.239. Twice the "
        "epochs does not narrow them (the second seed, 200 epochs: 0.060 / 0.054 / 0.128 / 0.170 / "
        "0.189 / 0.137 / 0.246); twice the tables, at twice the paper's cost, narrows floors 2-4 by "
        "13-28% (N = 16,000, 100 epochs: 0.058 / 0.050 / 0.105 / 0.120 / 0.140 / 0.162 / 0.212).",))
