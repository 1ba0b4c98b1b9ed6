"""Shards without Ray: thinstream.ray.run_shard_files (the body of each Ray
task) and thinstream.merge give the results of one full run; bad shard
sets are refused."""

import json
import os

import pytest

import thinstream
from thinstream.ray import run_shard_files

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
EXP_GAP = os.path.abspath(os.path.join(ROOT, "scenarios", "seeds", "003-exp-gap.toml"))
OPTIONS = {"points": ["9", "12"], "repetitions": 2}


def without_wall(value):
    if isinstance(value, dict):
        return {k: without_wall(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list):
        return [without_wall(v) for v in value]
    return value


def write_shard(root, index, count, **extra):
    with open(EXP_GAP) as f:
        text = f.read()
    options = {"seed": None, "variants": None, "duration": None, "drain": None,
               "repetitions": None, "points": None}
    options.update(OPTIONS)
    options.update(extra)
    files = run_shard_files(text, EXP_GAP, index, count, options)
    assert sorted(files) == ["manifest.json", "runs.parquet", "samples.parquet"]
    d = os.path.join(root, f"shard-{index}-of-{count}-{extra.get('seed')}")
    os.makedirs(d)
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    return d


def test_shards_merge_to_the_full_run(tmp_path):
    full = thinstream.run(EXP_GAP, jobs=1, **OPTIONS)
    dirs = [write_shard(str(tmp_path), i, 3) for i in (2, 0, 1)]
    merged = thinstream.merge(dirs, out=str(tmp_path / "out"))
    assert merged.data["runs"] == full.data["runs"] == 12
    assert without_wall(merged.data) == without_wall(full.data)
    with open(tmp_path / "out" / "results.csv") as f:
        assert f.read() == thinstream._native.tidy_csv(json.dumps(full.data))
    # The per-run rows are plain Parquet.
    import pyarrow.parquet as pq

    runs = pq.read_table(os.path.join(dirs[1], "runs.parquet"))
    assert runs.column("run").to_pylist() == [0, 3, 6, 9]
    samples = pq.read_table(os.path.join(dirs[1], "samples.parquet"))
    assert samples.num_rows == sum(runs.column("delivered").to_pylist())


def test_missing_and_mismatched_shards_are_refused(tmp_path):
    a0 = write_shard(str(tmp_path), 0, 2)
    a1 = write_shard(str(tmp_path), 1, 2)
    b1 = write_shard(str(tmp_path), 1, 2, seed=5)
    with pytest.raises(ValueError, match="missing: 1/2"):
        thinstream.merge([a0])
    with pytest.raises(ValueError, match="different plans"):
        thinstream.merge([a0, b1])
    with pytest.raises(ValueError, match="given twice"):
        thinstream.merge([a0, a1, a1])
    with pytest.raises(ValueError, match="must be below n"):
        write_shard(str(tmp_path), 2, 2)
