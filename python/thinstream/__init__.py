"""thinstream from Python: the deterministic simulator, its results as
pandas and Arrow, presets, links and the 001 head-of-line model.

    import thinstream
    r = thinstream.run("scenarios/seeds/000-fig8-uniform.toml",
                       duration="60s", variants=["linux", "thin"], samples=True)
    df = r.to_pandas()          # one row per variant x sweep point
    t = r.samples()             # per-message samples, a pyarrow.Table
    r2 = thinstream.load("out/000-fig8-uniform")   # stored results
    r3 = thinstream.merge(["out/s/shard-0-of-2", "out/s/shard-1-of-2"])

Sweeps on a Ray cluster: `thinstream.ray.run(scenario, ...)` (Ray 2.x; see
python/README.md).

Runs are deterministic: the same scenario, seed and options give the same
numbers (results.json's `wall_s` apart).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence

from . import _native

try:
    from importlib.metadata import PackageNotFoundError, version as _version

    __version__ = _version("thinstream")
except PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "Results",
    "run",
    "load",
    "merge",
    "presets",
    "preset_tokens",
    "preset",
    "Link",
    "hol_model",
]

# Summary fields that are nested tables; flattened separately.
_NESTED = {"latency_ms", "by_retransmissions", "reasons", "spurious_by_reason"}


def _flatten_summary(summary: Dict[str, Any]) -> Dict[str, Any]:
    row: Dict[str, Any] = {}
    for key, value in summary.items():
        if key in _NESTED:
            continue
        if isinstance(value, (dict, list)):
            continue
        row[key] = value
    for stat, v in (summary.get("latency_ms") or {}).items():
        row[f"latency_{stat}_ms"] = v
    for g in summary.get("by_retransmissions") or []:
        n = f"rtx{g['retransmissions']}{'plus' if g.get('or_more') else ''}"
        for stat in ("count", "mean_ms", "p50_ms", "p99_ms", "max_ms"):
            row[f"{n}_{stat}"] = g.get(stat)
    for reason, count in (summary.get("reasons") or {}).items():
        row[f"sent_{reason.replace('-', '_')}"] = count
    for reason, count in (summary.get("spurious_by_reason") or {}).items():
        row[f"spurious_{reason.replace('-', '_')}"] = count
    return row


class Results:
    """The results of one scenario (the contents of its results.json), with
    optional per-message samples."""

    def __init__(self, data: Dict[str, Any], samples: Optional[Dict[str, list]] = None):
        self.data = data
        self._samples = samples

    @property
    def scenario(self) -> str:
        return self.data["scenario"]

    @property
    def variants(self) -> List[str]:
        return [v["name"] for v in self.data["variants"]]

    def rows(self) -> List[Dict[str, Any]]:
        """One flat dict per variant x sweep point (point "all" when the
        scenario has no sweep, or for a variant's pooled numbers); with a
        sweep, one column per axis (named by its parameter, e.g. "rate",
        "delay") holds the point's value on that axis."""
        out: List[Dict[str, Any]] = []
        sweep = self.data.get("sweep") or {}
        axes = [a["parameter"] for a in sweep.get("axes") or []]
        for v in self.data["variants"]:
            base = {
                "scenario": self.data["scenario"],
                "variant": v["name"],
                "transport": v.get("transport"),
                "preset": v.get("preset"),
                "available": v.get("available", True),
            }
            points = v.get("points") or []
            if points:
                for p in points:
                    row = dict(base, point=p["value"])
                    # One column per sweep axis with the point's value on it
                    # (a sweep with several axes joins them in `point`).
                    for name, value in zip(axes, p.get("coords") or []):
                        row[name] = value
                    row.update(_flatten_summary(p.get("summary") or {}))
                    for k in ("mtt_median_ms", "mtt_mean_ms", "mtt_ci95_ms"):
                        if p.get(k) is not None:
                            row[k] = p[k]
                    out.append(row)
            else:
                row = dict(base, point="all")
                row.update(_flatten_summary(v.get("summary") or {}))
                out.append(row)
        return out

    def to_pandas(self):
        """A pandas DataFrame, one row per variant x sweep point, flat
        column names (latency_p99_ms, rtx1_p99_ms, tohd, spurious, ...)."""
        import pandas as pd

        return pd.DataFrame(self.rows())

    def reductions(self):
        """MTT reductions of drop-position sweeps against the baseline as a
        DataFrame: one row per variant for the whole sweep (cell "all") and
        one per cell of a grid (the other axes' values, one column per
        axis), with `mean` (averaged over positions), `ci95` (95%
        half-width over repetitions; mean statistic only) and `positions`."""
        import pandas as pd

        sweep = self.data.get("sweep") or {}
        axes = [a["parameter"] for a in sweep.get("axes") or [] if a["parameter"] != "drop-data-packet"]
        rows = []
        for variant, red in (self.data.get("mtt_reduction") or {}).items():
            base = {"variant": variant, "baseline": red.get("baseline")}
            rows.append(dict(base, cell="all", mean=red.get("mean"), ci95=red.get("ci95"),
                             positions=sum(x is not None for x in red.get("per_point") or [])))
            for c in red.get("cells") or []:
                row = dict(base, cell=c["cell"], mean=c.get("mean"), ci95=c.get("ci95"),
                           positions=c.get("positions"))
                for name, value in zip(axes, c.get("coords") or []):
                    row[name] = value
                rows.append(row)
        return pd.DataFrame(rows)

    def tidy(self):
        """The long-format table of results.csv (scenario, variant, point,
        metric, statistic, value) as a DataFrame."""
        import io

        import pandas as pd

        return pd.read_csv(io.StringIO(_native.tidy_csv(json.dumps(self.data))))

    def samples(self):
        """Per-message samples (one row per message of every measured flow
        of every run) as a pyarrow.Table; only for `run(..., samples=True)`."""
        import pyarrow as pa

        if self._samples is None:
            raise ValueError(
                "no per-message samples: run the scenario with samples=True"
            )
        return pa.table(self._samples)

    def to_json(self) -> str:
        return json.dumps(self.data)

    def save(self, directory: str) -> str:
        """Write results.json into `directory` (created); returns its path."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "results.json")
        with open(path, "w") as f:
            f.write(self.to_json())
        return path

    def __repr__(self) -> str:
        return (
            f"Results(scenario={self.scenario!r}, variants={self.variants!r}, "
            f"runs={self.data.get('runs')})"
        )


def run(
    scenario: str,
    *,
    seed: Optional[int] = None,
    variants: Optional[Sequence[str]] = None,
    duration: Optional[str] = None,
    drain: Optional[str] = None,
    repetitions: Optional[int] = None,
    points: Optional[Sequence[str]] = None,
    jobs: Optional[int] = None,
    samples: bool = False,
    progress: bool = False,
) -> Results:
    """Run a scenario file in the simulator (all cores unless `jobs`).

    `duration`/`drain` are texts with a unit ("60s", "2h"); `points` are
    sweep values as the scenario prints them ("5%", "12"). `samples=True`
    keeps per-message samples (see Results.samples). Raises ValueError for
    a bad scenario or option, RuntimeError if the run fails."""
    text, cols = _native.run(
        os.fspath(scenario),
        seed=seed,
        variants=list(variants) if variants is not None else None,
        duration=duration,
        drain=drain,
        repetitions=repetitions,
        points=list(points) if points is not None else None,
        jobs=jobs,
        samples=samples,
        progress=progress,
    )
    return Results(json.loads(text), cols)


def load(results_dir: str) -> Results:
    """Stored results: a directory holding results.json (as written by
    `thinstream run` / `thinstream reproduce`), or the file itself."""
    path = os.fspath(results_dir)
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    with open(path) as f:
        return Results(json.load(f))


def merge(shard_dirs: Iterable[str], out: Optional[str] = None) -> Results:
    """Merge the shard directories of one scenario (`thinstream run --shard
    i/n`, or thinstream.ray) into the results of one full run, as
    `thinstream merge` does; with `out`, also write results.json and
    results.csv there. Raises ValueError for missing, duplicated or
    mismatched shards."""
    text, csv = _native.merge([os.fspath(d) for d in shard_dirs])
    if out is not None:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "results.json"), "w") as f:
            f.write(text)
        with open(os.path.join(out, "results.csv"), "w") as f:
            f.write(csv)
    return Results(json.loads(text))


def __getattr__(name: str):
    # `thinstream.ray` is imported on first use: it needs Ray, which the
    # rest of the package does not.
    if name == "ray":
        import importlib

        return importlib.import_module(".ray", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def presets() -> Dict[str, str]:
    """The preset bases and what they contain."""
    return dict(_native.presets())


def preset_tokens() -> List[Dict[str, str]]:
    """Every base, switch and parameter of the preset grammar."""
    return [
        {"token": t, "kind": k, "summary": s, "source": src}
        for (t, k, s, src) in _native.preset_tokens()
    ]


def preset(spec: str) -> Dict[str, Any]:
    """The main fields of a preset string's configuration, e.g.
    preset("thin+rdb")["rto_min_ms"]. Raises ValueError if it does not parse."""
    return _native.preset(spec)


class Link:
    """A link in the scenario files' netem-like words, e.g.
    Link("delay 50ms loss gemodel 1% 10% 70% 0.1%")."""

    def __init__(self, text: str):
        self.netem, self.mean_loss, self.delay_ms = _native.link(text)

    def __repr__(self) -> str:
        return f"Link({self.netem!r})"


def hol_model(
    loss: float,
    scheme: str = "streams",
    n: int = 1,
    *,
    rtt_ms: float = 20.0,
    rto_ms: float = 1000.0,
    rate_per_s: float = 100.0,
    processing_ms: float = 0.5,
) -> Dict[str, Any]:
    """The 001 head-of-line model (eqs. 1-5) for SCTP with `n` ordered
    streams ("streams"), unordered SCTP ("unordered") or `n` TCP
    connections ("tcp"); defaults are 001's testbed (RTT 20 ms, 100
    messages/s, RTO 1 s, processing 0.5 ms; 001 gives TCP's RTO as
    RTT + 200 ms). Returns detection time, queued messages, delay increase,
    one-way delay and response time (ms)."""
    return _native.hol_model(
        loss,
        scheme,
        n,
        rtt_ms=rtt_ms,
        rto_ms=rto_ms,
        rate_per_s=rate_per_s,
        processing_ms=processing_ms,
    )
