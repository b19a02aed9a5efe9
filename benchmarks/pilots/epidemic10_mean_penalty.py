r"""Pilot (session 60): does penalising the learned score's mean at the table's parameters remove
the facility rate's bias at theta*?

Every epidemic10 fit tested is biased at the truth: the learned full-data score's mean over data
sets at theta* is 15-18 SEs from zero, while the true score has mean zero at *every* theta,
E[s(theta, X) | theta] = 0 (sessions 57-59, notes in benchmarks/results/epidemic10.md). Score
matching sees this only through the 1/2 |E[s - s_true | theta]|^2 part of its loss. This pilot
adds a direct, unbiased penalty: a group table of G parameters from the localized q with R data
sets each, and per group the U-statistic

    U_g = 2 / (R (R - 1)) sum_{r < r'} s(theta_g, X_gr) . s(theta_g, X_gr')
        = (|sum_r s_r|^2 - sum_r |s_r|^2) / (R (R - 1)),

whose expectation is |E[s | theta_g]|^2: zero for the true score, so the true score still
minimises score matching + lambda mean_g U_g (unlike the squared norm of a group mean, which also
shrinks the score's variance).

The spread row's 6-epoch annealed fit of repetition 2 (saved by epidemic10_annealed.py 2 6) is
fine-tuned for EPOCHS epochs (Adam, lr 1e-4 -> 1e-5, batch 5 of the fit's table, K groups a step)
with weight LAMBDA; LAMBDA = 0 is the control (the same fine-tuning without the penalty). Then the
score-mean test at theta* and calibrate(at=theta*) over 100 data sets, as the other pilots.

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_mean_penalty.py LAMBDA EPOCHS [G R K]``
(defaults G = 2000, R = 8, K = 1; record part "mean_penalty" in epidemic10_local_sbc_scratch.jsonl).

``--metric``: score matching in the posterior's metric instead of u's, with or without the
penalty: 1/2 (s - s*)' M (s - s*) with M the Laplace posterior covariance at q's centre (the learned
scores' covariance over 1,000 data sets there plus the prior's precision, inverted; scaled to mean
diagonal 1), i.e. the implicit loss 1/2 S'MS + S'M grad log q + tr(M J). A score error b moves a
posterior that the data dominate by about Cov b, so the plain loss, |b|^2, barely sees an error
along the facility-floor ridge (a direction of large posterior variance) that moves the posterior
by several SDs; b'Mb is that move's squared length in posterior SDs. Part "mean_penalty_metric".

``--identity L``: also L times the group U-statistic of |E[S S' + dS/du | theta]|_F^2, the
information identity (the full-data analogue of the paper's curvature penalty, eqs. 23-24, which
needs several data sets per parameter here: the epidemic's data set is one summary matrix). With
the zero-mean penalty it pins the first two orders of the score field around the diagonal:
E_{x ~ theta} s(theta + delta, x) = 0 + E[dS/du] delta + O(delta^2), and E[dS/du] = -Cov(S).

``--scratch``: train fresh weights (same architecture and input standardisation) for EPOCHS epochs
at the row's annealing, lr 1e-3 -> 1e-5, with the penalties from the start, instead of fine-tuning
(part "mean_penalty_scratch"; LAMBDA = 0 reproduces the plain 6-epoch annealed fit's recipe).
"""
import copy
import json
import math
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
BENCH = Path(__file__).resolve().parents[1]
RUNS = BENCH.parent / "runs" / "pilots"
RECORDS = BENCH / "results" / "epidemic10_local_sbc_scratch.jsonl"
from epidemic10_truth import checks_at_truth  # noqa: E402

from scorebayes.calibration import score_mean_test  # noqa: E402
from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402
from scorebayes.scores.losses import evaluate_score, implicit_score_matching  # noqa: E402

metric, scratch = "--metric" in sys.argv, "--scratch" in sys.argv
argv = [a for a in sys.argv if a not in ("--metric", "--scratch")]
lam_id = 0.0  # --identity L: weight of the information-identity U-statistic
if "--identity" in argv:
    i = argv.index("--identity")
    lam_id = float(argv[i + 1])
    del argv[i : i + 2]
lam, epochs = float(argv[1]), int(argv[2])
G, R, K = (int(v) for v in argv[3:6]) if len(argv) > 5 else (2000, 8, 1)
rep, method = 2, "n-model-views-spread"
model = get_model("epidemic10")
est = torch.load(RUNS / f"epidemic10_{method}_epochs6_rep{rep}.pt", weights_only=False)
net = est.score_net_
t0 = time.time()

# the fit's table (u, its view, grad log q) and the group table from the same q
table = est.rounds_[0]
u_t = table["u"].float()
x_t = est._table_view(table["x"])
grad_q = est.proposal_.grad_log_prob_unconstrained(table["u"]).float()
g = make_generator(est.seed, "mean-penalty-groups")
u_g = est.proposal_.sample_unconstrained(G, g)
x_g = est.simulator(est.space.to_constrained(u_g).repeat_interleave(R, 0), est.n_obs_, g)
x_g = est._table_view(x_g.to(est.x_obs_.dtype)).reshape(G, R, -1)
u_g = u_g.float()
M = None  # the score-matching metric: identity (plain), or the posterior covariance (--metric)
if metric:
    # Laplace covariance at q's centre, from the fitted score alone (no truth): H = I + P with I the
    # learned scores' covariance over 1,000 data sets there and P the prior's precision in u
    centre = est.space.to_constrained(est.proposal_.mean)
    cov = score_mean_test(est, centre, 1000, seed=7).posterior_cov.to(torch.float64)
    M = (cov / torch.diagonal(cov).mean()).float()  # scale-free: mean diagonal 1
    print("metric: posterior SDs at q's centre", [round(v, 3) for v in torch.diagonal(cov).sqrt().tolist()],
          "correlations with the facility rate",
          [round(v, 2) for v in (cov[0] / (cov[0, 0] * torch.diagonal(cov)).sqrt()).tolist()], flush=True)


def sm_loss(total, jac, grad):
    """Per-row implicit score matching in the metric M (identity if None):
    1/2 S'MS + S'M grad log q + tr(M J)."""
    if M is None:
        return implicit_score_matching(total, jac, grad)
    ms = total @ M
    return 0.5 * (ms * total).sum(-1) + (ms * grad).sum(-1) + (M * jac).sum((-2, -1))


print(f"tables ready {time.time() - t0:.0f} s: main {tuple(x_t.shape)}, groups {tuple(x_g.shape)}", flush=True)

split = make_generator(est.seed, "mean-penalty-split")
perm, gperm = torch.randperm(len(u_t), generator=split), torch.randperm(G, generator=split)
va, tr = perm[: len(u_t) // 10], perm[len(u_t) // 10 :]
gva, gtr = gperm[: G // 10], gperm[G // 10 :]


def group_u(idx):
    """Per-group U-statistic of |E[s | theta]|^2, ``[len(idx)]``."""
    s = net(u_g[idx][:, None, :], x_g[idx])  # [k, R, d]
    return ((s.sum(1) ** 2).sum(-1) - (s**2).sum((1, 2))) / (R * (R - 1))


def group_identity(idx):
    """Per-group U-statistic of |E[S S' + dS/du | theta]|_F^2 (zero for the true score), ``[len(idx)]``."""
    k = len(idx)
    ev = evaluate_score(net, u_g[idx].repeat_interleave(R, 0), x_g[idx].reshape(k * R, 1, -1),
                        create_graph=torch.is_grad_enabled())
    s, jac = ev.total.reshape(k, R, -1), ev.jacobian.reshape(k, R, s_dim, s_dim)
    a = s[..., :, None] * s[..., None, :] + jac  # [k, R, d, d]
    return ((a.sum(1) ** 2).sum((-2, -1)) - (a**2).sum((1, 2, 3))) / (R * (R - 1))


s_dim = u_t.shape[1]


def validate():
    net.eval()
    sm = []
    with torch.enable_grad():
        for idx in va.split(200):
            ev = evaluate_score(net, u_t[idx], x_t[idx], create_graph=False)
            sm.append(sm_loss(ev.total, ev.jacobian, grad_q[idx]).detach())
    with torch.no_grad():
        pen = torch.cat([group_u(idx) for idx in gva.split(50)])
    with torch.enable_grad():
        ident = torch.cat([group_identity(idx).detach() for idx in gva.split(25)])
    sm = torch.cat(sm)
    return (float(sm.mean()), float(pen.mean()), float(pen.std() / math.sqrt(len(pen))),
            float(ident.mean()), float(ident.std() / math.sqrt(len(ident))))


lr = (1e-4, 1e-5)
if scratch:  # the same architecture and input standardisation, fresh weights, the row's annealing
    torch.manual_seed(est.seed % 2**31)
    fresh = 0
    with torch.no_grad():
        for module in net.modules():
            if module is not net and hasattr(module, "reset_parameters"):
                module.reset_parameters()
                fresh += 1
            if hasattr(module, "weights") and hasattr(module, "biases"):  # _ViewBlock's batched layers
                for w, b in zip(module.weights, module.biases):  # nn.Linear's rule: U(+-fan_in^-1/2)
                    bound = w.shape[1] ** -0.5
                    w.uniform_(-bound, bound)
                    b.uniform_(-bound, bound)
                    fresh += 2
    print(f"fresh weights: {fresh} tensors", flush=True)
    lr = (1e-3, 1e-5)
history = [validate()]
print("before: validation SM %.2f, penalty %.2f (se %.2f), identity %.1f (se %.1f)" % history[0], flush=True)
opt = torch.optim.Adam(net.parameters(), lr=lr[0])
sched = torch.optim.lr_scheduler.ExponentialLR(opt, (lr[1] / lr[0]) ** (1 / max(1, epochs)))
best, best_state = math.inf, None
step_gen = make_generator(est.seed, "mean-penalty-steps")
for epoch in range(epochs):
    net.train()
    batches = tr[torch.randperm(len(tr), generator=step_gen)].split(5)
    for idx in batches:
        opt.zero_grad(set_to_none=True)
        ev = evaluate_score(net, u_t[idx], x_t[idx])
        loss = sm_loss(ev.total, ev.jacobian, grad_q[idx]).mean()
        if lam > 0:
            gidx = gtr[torch.randint(len(gtr), (K,), generator=step_gen)]
            loss = loss + lam * group_u(gidx).mean()
        if lam_id > 0:
            gidx = gtr[torch.randint(len(gtr), (K,), generator=step_gen)]
            loss = loss + lam_id * group_identity(gidx).mean()
        if not torch.isfinite(loss):
            raise FloatingPointError("non-finite loss")
        loss.backward()
        opt.step()
    sched.step()
    history.append(validate())
    sm, pen, pen_se, ident, ident_se = history[-1]
    print(f"epoch {epoch + 1}: validation SM {sm:.2f}, penalty {pen:.2f} (se {pen_se:.2f}), "
          f"identity {ident:.1f} (se {ident_se:.1f}), {time.time() - t0:.0f} s", flush=True)
    if sm + lam * pen + lam_id * ident < best:
        best, best_state = sm + lam * pen + lam_id * ident, copy.deepcopy(net.state_dict())
net.load_state_dict(best_state)
net.eval()

sm_test, cal = checks_at_truth(est, model)
print(f"total {time.time() - t0:.0f} s")
with open(RECORDS, "a") as fh:
    fh.write(json.dumps({"rep": rep, "method": method, "part": "mean_penalty" + ("_metric" if metric else "") + ("_scratch" if scratch else ""), "lambda": lam, "lambda_identity": lam_id,
                         "epochs": epochs, "groups": G, "group_size": R, "groups_per_step": K,
                         "history": history, "truth": cal.to_dict(), "score_mean": sm_test.to_dict()},
                        default=float) + "\n")
