"""The extractive answerer's threshold chosen on held-out questions (rag.answer.calibrate), and
its pin (rag.answer.calibrate_pin, `make calibrate`): used exactly when its inputs match.

A scripted word-overlap judge (tests/test_answer_offline.py) and a fixed in-memory retriever make
every score derivable by hand.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pytest

from rag import paths
from rag.answer import calibrate, calibrate_pin
from rag.answer.calibrate import (
    choose_threshold,
    held_out_questions,
    held_out_threshold,
    support_threshold,
    without_paper,
)
from rag.answer.context import ContextSettings
from rag.errors import ConfigError
from rag.retrieval.retrievers import RetrievalSettings
from tests.test_answer_offline import OverlapJudge, hit


def test_choose_threshold_maximises_balanced_accuracy_and_breaks_ties_upwards():
    # answer side 0.9, 0.7, 0.2; decline side 0.1, 0.3, 0.8
    t, curve = choose_threshold([0.9, 0.7, 0.2], [0.1, 0.3, 0.8], grid=[0.0, 0.25, 0.5, 0.85])
    by_t = {r["threshold"]: r for r in curve}
    assert by_t[0.0]["answered"] == 1.0 and by_t[0.0]["declined"] == 0.0
    assert by_t[0.5]["answered"] == pytest.approx(2 / 3)
    assert by_t[0.5]["declined"] == pytest.approx(2 / 3)
    assert by_t[0.25]["balanced_accuracy"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    # 0.5 (2/3 answered, 2/3 declined) and 0.85 (1/3, 3/3) tie at 2/3: the higher one wins
    assert by_t[0.85]["balanced_accuracy"] == pytest.approx(by_t[0.5]["balanced_accuracy"])
    assert t == 0.85
    t2, _ = choose_threshold([0.9, 0.7, 0.2], [0.1, 0.3, 0.8], grid=[0.0, 0.25, 0.5])
    assert t2 == 0.5


def test_choose_threshold_needs_both_sides():
    with pytest.raises(ConfigError, match="0 decline"):
        choose_threshold([0.5], [])


def test_without_paper_drops_the_own_paper_then_cuts():
    hits = [hit("a", 0.9, "x", paper="p1"), hit("b", 0.8, "y", paper="p2")]
    assert [h.chunk_id for h in without_paper(hits, "p1", 1)] == ["b"]
    assert [h.chunk_id for h in without_paper(hits, "p9", 2)] == ["a", "b"]


class TableRetriever:
    """Returns the same ranked hits for a question, whatever the depth asked (cut to k)."""

    name = "table"

    def __init__(self, table):
        self.table = table
        self.depths = []

    def retrieve(self, query, k):
        self.depths.append(k)
        return self.table[query][:k]


def test_held_out_threshold_scores_each_question_with_and_without_its_paper():
    q1 = "Which n-grams do they extract?"  # declarative form keeps "n-grams ... extract"
    table = {
        q1: [
            hit("own", 0.9, "We extract character n-grams of every word.", paper="p1"),
            hit("other", 0.5, "Weather reports mention rain in spring.", paper="p2"),
        ]
    }
    retr = TableRetriever(table)
    cal = held_out_threshold(
        OverlapJudge(), retr, {"q1": (q1, "p1")}, k=1, settings=ContextSettings(), grid=[0.3, 0.6]
    )
    with_own, without_own = cal.scores["q1"]
    assert with_own > without_own  # its own paper supports the statement, the other does not
    assert retr.depths == [50]  # retrieved once, deep enough to drop the paper and keep k
    assert cal.n == 1 and cal.balanced_accuracy == 1.0
    assert cal.threshold in (0.3, 0.6) and without_own < cal.threshold <= with_own
    assert set(cal.to_metrics()) >= {"threshold", "curve", "scores", "answered", "declined"}


def test_held_out_threshold_needs_questions():
    with pytest.raises(ConfigError, match="no held-out questions"):
        held_out_threshold(OverlapJudge(), TableRetriever({}), {}, k=3, settings=ContextSettings())


def test_support_threshold_rules():
    q1 = "Which n-grams do they extract?"
    table = {q1: [hit("own", 0.9, "We extract character n-grams of every word.", paper="p1")]}
    args = (OverlapJudge(), TableRetriever(table), {"q1": (q1, "p1")})
    kw = {"k": 1, "settings": ContextSettings()}
    assert support_threshold("held-out", 0.42, *args, **kw)[:2] == (0.42, None)  # fixed wins
    t, cal, how = support_threshold("judge", -1.0, *args, **kw)
    assert (t, cal) == (0.6, None) and "judge's own" in how  # OverlapJudge.fitted.threshold
    t, cal, how = support_threshold("held-out", -1.0, *args, **kw)
    assert cal is not None and t == cal.threshold and "1 human QASPER" in how
    t, cal, how = support_threshold("held-out", -1.0, *args, **kw, source="gold")
    assert "1 single-paper answerable questions of the gold file outside" in how
    with pytest.raises(ConfigError, match="'dev'"):
        support_threshold("dev", -1.0, *args, **kw)
    with pytest.raises(ConfigError, match="held-out source 'test'"):
        support_threshold("held-out", -1.0, *args, **kw, source="test")


def _gold(qid, papers, answerable=True):
    from rag.evaluation.gold import GoldItem

    ev = [{"arxiv_id": p, "page": 1, "quote": "x"} for p in papers] if answerable else []
    kind = "single-paper" if len(papers) == 1 else "multi-paper"
    return GoldItem(
        qid=qid, question=f"question {qid}?", answerable=answerable,
        answer="a" if answerable else "", answer_type="extractive" if answerable else "none",
        kind=kind if answerable else "unanswerable",
        papers=papers if answerable else [], evidence=ev, names_method=False,
    )  # fmt: skip


def test_held_out_gold_questions_never_include_a_graded_one():
    gold = [_gold("a", ["p1"]), _gold("b", ["p2"]), _gold("c", ["p1", "p2"]), _gold("u", [], False)]
    got = held_out_questions("gold", gold=gold, in_slice=["a"])
    # "a" is graded, "c" has two papers (no single paper to remove), "u" has none
    assert got == {"b": ("question b?", "p2")}
    assert held_out_questions("gold", gold=gold, in_slice=["a", "b"]) == {}


def test_held_out_qasper_questions_are_those_on_the_corpus_papers():
    from types import SimpleNamespace as NS

    qasper = [NS(qid="x", question="qx", arxiv_id="p1"), NS(qid="y", question="qy", arxiv_id="p9")]
    assert held_out_questions("qasper", qasper=qasper, papers=["p1"]) == {"x": ("qx", "p1")}
    with pytest.raises(ConfigError, match="held-out source 'dev'"):
        held_out_questions("dev")


# --- the pinned calibration (rag.answer.calibrate_pin, `make calibrate`) -------------------------

IDENTITY = calibrate_pin.IndexIdentity(
    chunks="chunks-1", embedder="bow", dense={"kind": "flat"}, bm25={"k1": 1.5}
)
Q1 = "Which n-grams do they extract?"
TABLE = {
    Q1: [
        hit("own", 0.9, "We extract character n-grams of every word.", paper="p1"),
        hit("other", 0.5, "Weather reports mention rain in spring.", paper="p2"),
    ]
}
HELD_OUT = {"q1": (Q1, "p1")}
TITLES = {"p1": "Subword vectors", "p2": "Weather"}


def _inputs(gold, **change):
    args = {
        "gold_path": gold,
        "held_out": HELD_OUT,
        "titles": TITLES,
        "index": IDENTITY,
        "judge": "overlap",
        "retriever": "table",
        "retrieval": RetrievalSettings(k=1),
        "k": 1,
        "settings": ContextSettings(),
        "source": "gold",
    }
    return calibrate_pin.calibration_inputs(**(args | change))


def _choose(pinned):
    return support_threshold(
        "held-out", -1.0, OverlapJudge(), TableRetriever(TABLE), HELD_OUT,
        k=1, settings=ContextSettings(), titles=TITLES, source="gold", pinned=pinned,
    )  # fmt: skip


@pytest.fixture()
def gold_file(tmp_path):
    path = tmp_path / "gold.jsonl"
    path.write_text('{"qid": "q1"}\n', encoding="utf-8")
    return path


def test_the_pinned_calibration_is_exactly_what_calibrating_gives(gold_file, tmp_path, monkeypatch):
    inputs, pin = _inputs(gold_file), tmp_path / "data" / "support-threshold.json"
    t0, cal0, how0 = _choose(calibrate_pin.lookup(inputs, pin))
    where = paths.display(pin)
    assert how0.endswith(f"; calibrated here (no pinned calibration at {where})")
    calibrate_pin.write(cal0, inputs, pin)

    def no_calibration(*a, **k):
        raise AssertionError("calibrated despite a pin chosen on the same inputs")

    monkeypatch.setattr(calibrate, "held_out_threshold", no_calibration)
    t1, cal1, how1 = _choose(calibrate_pin.lookup(inputs, pin))
    assert (t1, cal1) == (t0, cal0)  # threshold, rates, curve and every per-question score
    assert json.dumps(cal1.to_metrics()) == json.dumps(cal0.to_metrics())  # metrics.json alike
    assert how1.split("; ")[0] == how0.split("; ")[0]
    assert how1.endswith(f"; pinned in {where}, chosen on the same inputs (`make calibrate`)")


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"gold": '{"qid": "q2"}\n'}, "gold_sha256"),
        ({"held_out": {"q1": (Q1, "p2")}}, "held_out_sha256"),
        ({"held_out": HELD_OUT | {"q2": ("What else?", "p2")}}, "held_out_n, held_out_sha256"),
        ({"titles": {"p1": "Subword vectors (v2)", "p2": "Weather"}}, "titles_sha256"),
        ({"index": replace(IDENTITY, chunks="chunks-2")}, "chunks"),
        ({"index": replace(IDENTITY, embedder="minilm")}, "embedder"),
        ({"index": replace(IDENTITY, dense={"kind": "hnsw"})}, "dense_index"),
        ({"judge": "offline-v2:other"}, "judge"),
        ({"settings": ContextSettings(order="edges")}, "context_settings"),
        ({"k": 2, "retrieval": RetrievalSettings(k=2)}, "k, retrieval_settings"),
        ({"source": "qasper"}, "held_out_source"),
    ],
)  # fmt: skip
def test_a_changed_input_means_calibrating_and_says_which(
    change, named, gold_file, tmp_path, caplog
):
    pin = calibrate_pin.write(_choose(None)[1], _inputs(gold_file), tmp_path / "pin.json")
    if "gold" in change:
        gold_file.write_text(change.pop("gold"), encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="rag.answer.calibrate_pin"):
        found = calibrate_pin.lookup(_inputs(gold_file, **change), pin)
    assert found.calibration is None
    assert found.note == (
        f"calibrated here ({paths.display(pin)} was chosen on other inputs: {named})"
    )
    assert "differ" in caplog.text
    calls = []
    real = calibrate.held_out_threshold

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(calibrate, "held_out_threshold", counted)
        _, cal, how = _choose(found)
    assert calls == [1] and cal is not None and how.endswith(found.note)


def test_a_new_code_version_stops_the_pin(gold_file, tmp_path, monkeypatch):
    pin = calibrate_pin.write(_choose(None)[1], _inputs(gold_file), tmp_path / "pin.json")
    monkeypatch.setattr(calibrate_pin, "CALIBRATION_VERSION", "held-out-threshold-v999")
    assert "inputs: code)" in calibrate_pin.lookup(_inputs(gold_file), pin).note


def test_a_broken_pin_file_is_named(tmp_path):
    bad = tmp_path / "support-threshold.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="support-threshold.json is not a pinned calibration"):
        calibrate_pin.lookup({}, bad)
    bad.write_text(json.dumps({"inputs": {}, "threshold": 0.5}), encoding="utf-8")
    with pytest.raises(ConfigError, match="is not a pinned calibration"):
        calibrate_pin.lookup({}, bad)


def test_the_committed_pin_is_what_notebook_05_would_use_on_the_default_profile(shared_dir):
    """The inputs the default profile computes today (corpus, gold, held-out questions, index,
    embedder, judge, settings, code version) are those the committed pin was chosen on, so 05
    takes its calibration; after a change to any of them this fails until `make calibrate`."""
    import re

    from rag.report.calibrate import profile_inputs

    inputs = profile_inputs("default")
    doc = json.loads(calibrate_pin.pin_path().read_text(encoding="utf-8"))
    found = calibrate_pin.lookup(inputs)
    if calibrate_pin.differing_inputs(inputs, doc["inputs"]) == ["embedder"]:
        # A CPU without bf16 embeds the passages in fp32 (the fingerprint's ``passages=`` part),
        # so its vectors, and the calibration, may differ: 05 must refit, naming why. Any other
        # difference of the embedder is a stale pin.
        def backend_free(fingerprint: str) -> str:
            return re.sub(r"\|passages=[^|]*", "", fingerprint)

        assert backend_free(inputs["embedder"]) == backend_free(doc["inputs"]["embedder"])
        assert found.calibration is None and "embedder" in found.note
        pytest.skip("this CPU embeds passages otherwise (bf16 vs fp32): the pin does not apply")
    assert found.calibration is not None, found.note
    assert found.calibration.to_metrics() == {k: v for k, v in doc.items() if k != "inputs"}
    assert found.calibration.n == doc["inputs"]["held_out_n"]


@pytest.mark.slow
def test_calibrating_again_reproduces_the_pin(shared_dir):
    """`make calibrate` is a reproduction: a fresh calibration gives the pinned numbers."""
    from rag.report.calibrate import fit_profile

    cal, inputs = fit_profile("default")
    doc = json.loads(calibrate_pin.pin_path().read_text(encoding="utf-8"))
    differ = calibrate_pin.differing_inputs(inputs, doc["inputs"])
    if differ == ["embedder"]:
        pytest.skip(
            "this CPU embeds passages otherwise (bf16 vs fp32); the pin does not apply here"
        )
    assert differ == []
    got = cal.to_metrics()
    for key in ("threshold", "balanced_accuracy", "answered", "declined", "n", "curve"):
        assert got[key] == doc[key], key
    assert list(got["scores"]) == list(doc["scores"])
    for qid, pair in doc["scores"].items():
        assert got["scores"][qid] == pytest.approx(pair, rel=1e-6, abs=1e-9), qid
