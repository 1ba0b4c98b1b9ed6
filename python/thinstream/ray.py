"""Sweeps on a Ray cluster (Ray 2.x).

    import thinstream.ray
    r = thinstream.ray.run("scenarios/scale/003-exp-gap-10k.toml",
                           address="auto", out="out/003-exp-gap-10k")
    r.to_pandas()

The plan's runs are split into shards (shard i holds the runs whose index is
i modulo the shard count, as `thinstream run --shard i/n`); each shard is a
Ray task that runs its runs with the package's native code and returns the
shard directory's files (manifest.json, runs.parquet, samples.parquet)
through the object store, so workers need no shared file system. The
driver writes them under `shard_dir` and merges them as `thinstream merge`
does: the results equal one full `thinstream.run` / `thinstream run` of the
same scenario and options (the wall_s fields apart).

Every worker needs this package installed (the same version as the driver:
merge refuses shards of another version). The scenario's text travels with
each task; files a scenario names by a relative path (e.g. a message-size
CSV) must exist at the same path on the workers.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

from . import Results, _native

__all__ = ["run", "run_shard_files"]


def run_shard_files(
    scenario_toml: str,
    scenario_path: str,
    index: int,
    count: int,
    options: Dict[str, Any],
    jobs: int = 1,
) -> Dict[str, bytes]:
    """Run shard `index` of `count` here and return its files by name (the
    body of each Ray task; usable without Ray)."""
    with tempfile.TemporaryDirectory(prefix="thinstream-shard-") as d:
        out = os.path.join(d, "shard")
        _native.run_shard(
            scenario_toml, scenario_path, index, count, out, jobs=jobs, **options
        )
        files: Dict[str, bytes] = {}
        for name in sorted(os.listdir(out)):
            with open(os.path.join(out, name), "rb") as f:
                files[name] = f.read()
        return files


class _Progress:
    """tqdm if installed, else a line on stderr every few seconds."""

    def __init__(self, total: int, enabled: bool, desc: str):
        self.total, self.done, self.enabled = total, 0, enabled
        self.bar = None
        self.last = 0.0
        self.desc = desc
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit="run", desc=desc, smoothing=0.1)
        except ImportError:
            self.bar = None

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.monotonic()
        if now - self.last >= 2.0 or self.done == self.total:
            self.last = now
            print(f"{self.desc}: {self.done}/{self.total} runs", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(
    scenario: str,
    *,
    shards: Optional[int] = None,
    address: Optional[str] = None,
    out: Optional[str] = None,
    shard_dir: Optional[str] = None,
    seed: Optional[int] = None,
    variants: Optional[Sequence[str]] = None,
    duration: Optional[str] = None,
    drain: Optional[str] = None,
    repetitions: Optional[int] = None,
    points: Optional[Sequence[str]] = None,
    jobs_per_shard: int = 1,
    progress: bool = True,
    init: Optional[Dict[str, Any]] = None,
) -> Results:
    """Run a scenario's sweep as Ray tasks and merge the shards.

    `shards`: how many tasks (default: 8 per CPU of the cluster, at most one
    per run); more shards give a finer progress bar and better balance,
    fewer less overhead. `address`: the cluster (`"auto"`, `"ray://..."`,
    `"HOST:PORT"`); without it, an already initialised Ray is used, else
    `ray.init()` starts a local one. `init`: more keyword arguments for
    `ray.init` (e.g. `runtime_env`). If this call initialises Ray, it shuts
    it down again before returning. `out`: also write results.json and
    results.csv there. `shard_dir`: keep the shard directories there
    (default: a temporary folder, removed after the merge).
    `jobs_per_shard`: threads (and Ray CPUs) per task. The plan options
    are those of `thinstream.run`. Returns the merged Results; raises
    ValueError for a bad scenario or option, RuntimeError if a shard failed.
    """
    try:
        import ray
    except ImportError as e:  # pragma: no cover - exercised only without ray
        raise ImportError(
            "thinstream.ray needs Ray 2.x: pip install 'ray==2.*' (or thinstream[ray])"
        ) from e

    path = os.path.abspath(os.fspath(scenario))
    with open(path) as f:
        text = f.read()
    options: Dict[str, Any] = {
        "seed": seed,
        "variants": list(variants) if variants is not None else None,
        "duration": duration,
        "drain": drain,
        "repetitions": repetitions,
        "points": list(points) if points is not None else None,
    }
    total = _native.plan_runs(text, path, **options)
    if jobs_per_shard < 1:
        raise ValueError(f"jobs_per_shard = {jobs_per_shard}: must be at least 1")

    started_here = False
    if not ray.is_initialized():
        ray.init(address=address, **(init or {}))
        started_here = True
    temp = None
    try:
        if shards is None:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            shards = max(1, min(total, 8 * max(1, cpus)))
        if shards < 1:
            raise ValueError(f"shards = {shards}: must be at least 1")
        if shard_dir is None:
            temp = tempfile.mkdtemp(prefix="thinstream-ray-")
            root = temp
        else:
            root = os.fspath(shard_dir)
            os.makedirs(root, exist_ok=True)

        task = ray.remote(num_cpus=jobs_per_shard)(run_shard_files)
        name = os.path.splitext(os.path.basename(path))[0]
        pending = {
            task.remote(text, path, i, shards, options, jobs_per_shard): i
            for i in range(shards)
        }
        bar = _Progress(total, progress, name)
        dirs: List[str] = []
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i = pending.pop(ref)
                    try:
                        files = ray.get(ref)
                    except Exception as e:
                        for other in pending:
                            ray.cancel(other)
                        raise RuntimeError(f"shard {i}/{shards} failed: {e}") from e
                    d = os.path.join(root, f"shard-{i}-of-{shards}")
                    os.makedirs(d, exist_ok=True)
                    for fname, data in files.items():
                        with open(os.path.join(d, fname), "wb") as f:
                            f.write(data)
                    dirs.append(d)
                    manifest = json.loads(files["manifest.json"])
                    bar.update(int(manifest["runs"]))
        finally:
            bar.close()
        text_json, csv = _native.merge(sorted(dirs))
        results = Results(json.loads(text_json))
        if out is not None:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "results.json"), "w") as f:
                f.write(text_json)
            with open(os.path.join(out, "results.csv"), "w") as f:
                f.write(csv)
        return results
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        if started_here:
            ray.shutdown()
