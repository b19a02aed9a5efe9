"""The ``scorebayes`` command line: ``run``, ``demo``, ``status`` and ``bench``.

A thin layer over the Python API. Failures are told apart by kind, each one line on stderr:

- bad input (a `ConfigError`: the config schema's errors, a missing
  file, data of the wrong shape; a [`SimulatorError`][scorebayes.simulators.SimulatorError]: a simulator's
  unusable output; a [`StoreError`][scorebayes.store.StoreError]: an ``--out`` directory of another
  run): exit 2, no traceback. A run refused before any work leaves no output directory behind.
- the user's code raised (a simulator, model, summary or prior function named in the config):
  exit 2, the message names the user's file and line (the innermost frame in that file).
- anything else is a bug in scorebayes: exit 1, ``internal error: TYPE: MESSAGE (a bug in
  scorebayes; traceback in DIR/error.log)``, the traceback written to ``DIR/error.log`` (the
  run's ``--out`` directory; the system's temporary directory for other commands).

``--debug`` prints the traceback of every kind.
"""

from __future__ import annotations

import argparse
import runpy
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .apps.outputs import write_outputs
from .config import ConfigError, load_config, one_line, user_frame

__all__ = ["main"]


def _cmd_run(args: argparse.Namespace) -> int:
    from .apps import get_runner
    from .apps.common import using_store
    from .apps.schema import validate
    from .store import RunStore

    config_path = Path(args.config)
    out_dir = Path(args.out) if args.out else Path("runs") / config_path.stem
    args.out_dir = out_dir  # where an internal error's traceback goes
    config = load_config(config_path)
    validate(config, config_path.parent.resolve())  # every key checked before any work
    seed = int(args.seed if args.seed is not None else config.get("seed", 0))
    method = config["method"]
    runner = get_runner(method)
    start = time.perf_counter()
    existed = out_dir.exists()
    created = not (out_dir / "manifest.json").is_file()
    store = RunStore(out_dir, config=config, seed=seed, fresh=args.fresh)
    try:
        with using_store(store):
            result = runner(config, base_dir=config_path.parent.resolve(), out_dir=out_dir,
                            seed=seed, progress=not args.quiet and sys.stderr.isatty())
    except Exception:
        # refused before any work (e.g. a bad option): the corrected config may reuse --out
        if created and not any(p.is_file() for p in out_dir.rglob("*") if p.name != "manifest.json"):
            (out_dir / "manifest.json").unlink(missing_ok=True)
            if not existed:
                _remove_empty(out_dir)
        raise
    extra = result.extra
    extra.setdefault("resumed_simulations", 0)
    extra.setdefault("failed_simulations", 0)
    extra.setdefault("nonfinite_simulations", 0)
    extra["resumed_stages"] = list(store.resumed_stages)
    # a resumed run's earlier processes, to their last save (scorebayes.store's ledger)
    extra["seconds_earlier_processes"] = round(store.earlier_seconds, 3)
    summary = write_outputs(result, out_dir, method=method, seed=seed,
                            seconds=time.perf_counter() - start)
    if not args.quiet:
        print(result.posterior.format_summary(truth=result.truth))
        print(f"wrote {out_dir}/summary.json, samples.csv, pairplot.png "
              f"({summary['seconds']:.1f} s)")
    return 0


def _remove_empty(folder: Path) -> None:
    """Remove ``folder`` and the empty folders inside it (nothing if it holds a file)."""
    try:
        for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            sub.rmdir()
        folder.rmdir()
    except OSError:
        pass


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    args.out_dir = Path(args.out)
    run_demo(Path(args.out), seed=args.seed or 0, progress=not args.quiet and sys.stderr.isatty())
    return 0


def _find_benchmarks() -> Path:
    here = Path(__file__).resolve()
    for candidate in (Path.cwd() / "benchmarks", here.parents[2] / "benchmarks"):
        if candidate.is_dir():
            return candidate
    raise ConfigError("benchmarks/ not found: run from the repository root (editable install)")


def _cmd_status(args: argparse.Namespace) -> int:
    from .run_status import format_status, read_status

    try:
        statuses = [read_status(folder) for folder in args.dirs]  # a bad folder stops before any output
    except FileNotFoundError as err:  # not a run directory: the user's mistake
        raise ConfigError(str(err)) from None
    print("\n".join(format_status(status) for status in statuses))
    return 0


def _cmd_bench(args: argparse.Namespace, rest: list[str]) -> int:
    """Run ``benchmarks/NAME.py`` with the remaining arguments (``--help`` included: the
    benchmark's own options); without a name, list the benchmarks."""
    folder = _find_benchmarks()
    names = sorted(p.stem.replace("_", "-") for p in folder.glob("*.py") if not p.stem.startswith("_"))
    if args.name is None:
        print("usage: scorebayes bench NAME [options]  (scorebayes bench NAME --help: its options)\n"
              f"benchmarks: {', '.join(names)}")
        if {"-h", "--help"} & set(rest):
            return 0
        raise ConfigError("bench needs a benchmark name")
    script = folder / f"{args.name.replace('-', '_')}.py"
    if not script.is_file():
        raise ConfigError(f"unknown benchmark {args.name!r}; available: {names}")
    sys.argv = [str(script), *rest]
    sys.path.insert(0, str(folder))
    runpy.run_path(str(script), run_name="__main__")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scorebayes", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one inference from a TOML config")
    run.add_argument("config")
    run.add_argument("--out", help="output directory (default runs/<config name>)")
    run.add_argument("--seed", type=int, help="overrides the config's seed")
    run.add_argument("--quiet", action="store_true", help="no progress bars or summary")
    run.add_argument("--fresh", action="store_true",
                     help="discard what --out DIR holds and start over (else: resume)")

    demo = sub.add_parser("demo", help="a small built-in example, end to end")
    demo.add_argument("--out", default="demo-output")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--quiet", action="store_true")

    status = sub.add_parser("status", help="how far the runs in run directories got (safe mid-run)")
    status.add_argument("dirs", nargs="+", metavar="DIR")

    # no help option of its own: ``bench NAME --help`` reaches the benchmark's parser
    bench = sub.add_parser("bench", help="run a benchmark from benchmarks/ (extra args passed on)", add_help=False)
    bench.add_argument("name", nargs="?")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "bench":
        parser.error(f"unrecognised arguments: {' '.join(rest)}")
    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "demo":
            return _cmd_demo(args)
        if args.command == "status":
            return _cmd_status(args)
        return _cmd_bench(args, rest)
    except KeyboardInterrupt:
        print("interrupted: re-run the same command to resume", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - every failure is reported by kind
        return _report(err, args)


def _report(err: Exception, args: argparse.Namespace) -> int:
    """One line on stderr for ``err`` by kind (see the module docstring); the exit code."""
    from .simulators import SimulatorError
    from .store import StoreError

    if args.debug:
        traceback.print_exception(err)
    if isinstance(err, ConfigError | SimulatorError | StoreError):
        print(f"scorebayes: error: {one_line(err, 2000)}", file=sys.stderr)
        return 2
    found = user_frame(err)
    if found is not None:
        file, line, function = found
        print(f"scorebayes: error: your code raised {type(err).__name__}: {one_line(err)} at "
              f"{file}:{line} in {function}" + ("" if args.debug else " (--debug for the traceback)"),
              file=sys.stderr)
        return 2
    folder = getattr(args, "out_dir", None) or Path(tempfile.gettempdir())
    log = Path(folder) / "error.log"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(traceback.format_exception(err)))
        where = f"traceback in {log}"
    except OSError:
        where = "run with --debug for the traceback"
    print(f"scorebayes: internal error: {type(err).__name__}: {one_line(err)} "
          f"(a bug in scorebayes; {where})", file=sys.stderr)
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
