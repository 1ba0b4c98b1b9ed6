"""thinstream.ray against a local Ray cluster that this test starts
(`ray start --head --block` on a free loopback port, in a temporary
folder) and stops again: the sweep's shards run as Ray tasks and the
merged results equal one full run."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

# Keep Ray on loopback: without this, Ray replaces 127.0.0.1 by the host's
# interface address for the cluster's own connections (its
# `ENABLE_RAY_CLUSTER` switch; read when ray is imported, and inherited by
# the `ray start` below and its workers).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

ray = pytest.importorskip(
    "ray", reason="Ray is not installed: pip install 'ray==2.*' (scripts/setup does)"
)

import thinstream  # noqa: E402
import thinstream.ray as tray  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
EXP_GAP = os.path.abspath(os.path.join(ROOT, "scenarios", "seeds", "003-exp-gap.toml"))
OPTIONS = {"points": ["9", "10", "11", "12"], "repetitions": 3}
START_TIMEOUT_S = 45


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def without_wall(value):
    if isinstance(value, dict):
        return {k: without_wall(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list):
        return [without_wall(v) for v in value]
    return value


@pytest.fixture(scope="module")
def cluster():
    # A short folder name: Ray's Unix socket paths must stay short.
    tmp = tempfile.mkdtemp(prefix="tsray", dir="/tmp")
    port = free_port()
    log_path = os.path.join(tmp, "ray-start.log")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    log = open(log_path, "w")
    # --block: the command stays in the foreground and stops the processes
    # it started when it is terminated, so only this test's cluster stops.
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
            f"--port={port}", "--num-cpus=2", "--node-ip-address=127.0.0.1",
            "--include-dashboard=false", "--disable-usage-stats",
            f"--temp-dir={tmp}", "--object-store-memory=100000000",
        ],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with open(log_path) as f:
                text = f.read()
            if "Ray runtime started" in text:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray start did not come up (exit {proc.poll()}):\n{text[-3000:]}")
            time.sleep(0.5)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if proc.poll() is None:
            # `ray start --block` drains and stops what it started on
            # SIGTERM; its process group (its own session) is killed only
            # if it does not finish.
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=45)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def test_ray_sweep_equals_the_full_run(cluster, tmp_path):
    full = thinstream.run(EXP_GAP, jobs=1, **OPTIONS)
    shard_dir = tmp_path / "shards"
    r = tray.run(
        EXP_GAP, shards=5, address=cluster, out=str(tmp_path / "out"),
        shard_dir=str(shard_dir), progress=True, **OPTIONS,
    )
    assert not ray.is_initialized(), "run() shuts down the Ray it initialised"
    assert r.data["runs"] == full.data["runs"] == 36
    assert without_wall(r.data) == without_wall(full.data)
    shards = sorted(os.listdir(shard_dir))
    assert shards == [f"shard-{i}-of-5" for i in range(5)]
    runs = 0
    for s in shards:
        with open(shard_dir / s / "manifest.json") as f:
            m = json.load(f)
        assert m["shard"]["count"] == 5 and m["plan_runs"] == 36
        runs += m["runs"]
    assert runs == 36
    with open(tmp_path / "out" / "results.csv") as f:
        assert f.read() == thinstream._native.tidy_csv(json.dumps(full.data))
    assert r.data["mtt_reduction"]["er-packet"]["mean"] is not None
