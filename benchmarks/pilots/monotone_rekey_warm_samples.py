"""Session 50: re-key the monotone paper-scale row's warm-started samples in the run store.
ScoreLangevin.sample named its samples by a hash of all its locals; with init=Posterior these
included derived locals: init_u (session 49) and, after the review mend 22da6cc, a start sampler
whose repr holds a memory address, so no later process found them. Names are now a hash of the
arguments only. This checks that the stored file is the one the old (session 49) rule names for
exactly this call (arguments + init_u), and copies it under the new name.
Usage, from the repository root: ``.venv/bin/python benchmarks/pilots/monotone_rekey_warm_samples.py REP
[--apply]`` (without --apply it only checks; session 50 applied it to repetitions 0 and 1, then
``scorebayes bench monotone --carry``)."""
import shutil, sys
import torch
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
import monotone as mb
from _sbi_common import method_store
from scorebayes.models import get_model
from scorebayes.parallel import make_generator
from scorebayes.sbi import ScoreLangevin

torch.set_num_threads(1)
rep, apply = int(sys.argv[1]), "--apply" in sys.argv
seeds = {0: 2442950534821571425, 1: 3287889073522785514}
model = get_model("monotone")
x = model.observed(make_generator(0, "observed", rep))
seed = seeds[rep]
paper = {**mb.FULL, "sampling": mb.PAPER_SCALE_SAMPLING}
store = method_store(mb.NAME, "single-model-paper-scale", seed,
                     {"single": mb.FULL["single"], "localization": mb.FULL["localization"]})
sl = mb.score_model(model, paper, seed=seed, store=store).fit(x)
orig = ScoreLangevin._samples_name
seen = {}

class Stop(Exception):
    pass

def spy(self, arguments):
    seen["args"] = dict(arguments)
    name = orig(self, dict(arguments))
    seen["name"] = name
    if not store.is_done(name):
        raise Stop(name)
    return name

ScoreLangevin._samples_name = spy
first = mb._score_result(sl, paper, seed).posterior  # raises Stop if the cold sampling is not stored
print("cold sampling found under", seen["name"], "(name unchanged by the fix)")
sl.refit_debiasing(first, bandwidth=mb.PAPER_SCALE_REFITS["bandwidth"])
try:
    mb._score_result(sl, paper, seed, init=first)
    print("warm sampling already stored under", seen["name"]); sys.exit(0)
except Stop as stop:
    new = str(stop)
args = seen["args"]
old = orig(sl, {**args, "init_u": sl._posterior_u(first)})  # the session-49 rule: + the local init_u
print("new name", new, "| session-49 name", old, "stored:", store.is_done(old))
if not store.is_done(old):
    sys.exit("the session-49 name is not in the store: nothing to migrate")
if apply:
    shutil.copy2(store.file("arrays", old, ".npz"), store.file("arrays", new, ".npz"))
    store.mark_done(new, store.stage_info(old))
    print("copied", old, "->", new)
