"""Tests of the thinstream Python package (run by scripts/test)."""

import os

import pytest

import thinstream

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
EXP_GAP = os.path.join(ROOT, "scenarios", "seeds", "003-exp-gap.toml")


def small_run(**kw):
    return thinstream.run(EXP_GAP, repetitions=2, points=["9", "12"], jobs=2, **kw)


def test_run_to_pandas_one_row_per_variant_and_point():
    r = small_run()
    df = r.to_pandas()
    assert len(df) == len(r.variants) * 2
    assert set(df["point"]) == {"9", "12"}
    for col in ("variant", "messages", "delivered", "latency_p99_ms", "rtx0_count", "tohd"):
        assert col in df.columns, col
    # Every message was delivered, and the latency columns are numbers.
    assert (df["delivered"] == df["messages"]).all()
    assert (df["latency_p99_ms"] >= df["latency_p50_ms"]).all()


def test_same_seed_same_numbers():
    a, b = small_run(seed=9), small_run(seed=9)
    strip = lambda r: {k: v for k, v in r.data.items() if k != "wall_s"}
    va = [{k: v for k, v in x.items() if k != "wall_s"} for x in a.data["variants"]]
    vb = [{k: v for k, v in x.items() if k != "wall_s"} for x in b.data["variants"]]
    assert va == vb
    assert strip(a)["seed"] == 9
    c = small_run(seed=10)
    vc = [{k: v for k, v in x.items() if k != "wall_s"} for x in c.data["variants"]]
    assert vc != va, "another seed gives other draws"


def test_samples_are_an_arrow_table_matching_the_summary():
    r = small_run(samples=True)
    t = r.samples()
    assert t.num_rows == int(r.to_pandas()["messages"].sum())
    for col in ("variant", "point", "repetition", "message", "latency_ms", "retransmissions"):
        assert col in t.column_names
    # Sample latencies are what the summary's maximum was computed from.
    df = t.to_pandas()
    for (variant, point), g in df.groupby(["variant", "point"]):
        row = r.to_pandas().query("variant == @variant and point == @point").iloc[0]
        assert abs(g["latency_ms"].max() - row["latency_max_ms"]) < 1e-6


def test_samples_need_asking_for():
    with pytest.raises(ValueError):
        small_run().samples()


def test_save_and_load_round_trip(tmp_path):
    r = small_run()
    r.save(str(tmp_path))
    back = thinstream.load(str(tmp_path))
    assert back.data == r.data
    assert back.to_pandas().equals(r.to_pandas())
    tidy = back.tidy()
    assert list(tidy.columns) == ["scenario", "variant", "point", "metric", "statistic", "value"]
    assert len(tidy) > 0


def test_bad_input_raises_value_error():
    with pytest.raises(ValueError, match="frt=0"):
        thinstream.preset("linux+frt=0")
    with pytest.raises(ValueError):
        thinstream.run(EXP_GAP, repetitions=100_000_000)
    with pytest.raises(ValueError):
        thinstream.run(os.path.join(ROOT, "no-such-file.toml"))
    with pytest.raises(ValueError):
        thinstream.Link("delay 50 loss 5")  # units missing


def test_version_is_the_installed_package_version():
    from importlib.metadata import version

    assert thinstream.__version__ == version("thinstream")
    assert thinstream.__version__[0].isdigit()


def test_presets_links_and_model():
    assert {"rfc", "linux", "thin", "production"} <= set(thinstream.presets())
    assert thinstream.preset("thin")["rto_min_ms"] == 1000.0
    assert any(t["token"] == "rdb" for t in thinstream.preset_tokens())
    link = thinstream.Link("delay 50ms loss 5%")
    assert abs(link.mean_loss - 0.05) < 1e-12 and link.delay_ms == 50.0
    ordered = thinstream.hol_model(0.05, "streams", 1)
    unordered = thinstream.hol_model(0.05, "unordered")
    tcp = thinstream.hol_model(0.05, "tcp", 1, rto_ms=220.0)
    assert unordered["response_time_ms"] < ordered["response_time_ms"]
    assert tcp["response_time_ms"] > 0
    with pytest.raises(ValueError):
        thinstream.hol_model(2.0)


GRID = os.path.join(ROOT, "scenarios", "seeds", "003-grid-exp-4.toml")


def test_grid_sweep_has_a_column_per_axis_and_reductions_per_cell():
    points = ["500kbit/5ms/9", "500kbit/5ms/12", "2000kbit/25ms/9", "2000kbit/25ms/12"]
    r = thinstream.run(GRID, repetitions=3, points=points, jobs=2)
    assert r.data["schema_version"] == 6
    assert [a["parameter"] for a in r.data["sweep"]["axes"]] == ["rate", "delay", "drop-data-packet"]
    df = r.to_pandas()
    assert len(df) == len(r.variants) * 4
    assert set(df["point"]) == set(points)
    row = df[df["point"] == "2000kbit/25ms/12"].iloc[0]
    assert (row["rate"], row["delay"], row["drop-data-packet"]) == ("2000kbit", "25ms", "12")
    red = r.reductions()
    cells = red[red["cell"] != "all"]
    assert set(cells["cell"]) == {"500kbit/5ms", "2000kbit/25ms"}
    assert (cells["positions"] == 2).all()
    assert cells["ci95"].notna().all(), "three repetitions give an interval"
    assert set(cells["rate"]) == {"500kbit", "2000kbit"}
