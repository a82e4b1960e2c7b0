"""Each rule of rag.judge.synth yields a claim whose label holds, on fixed sentences."""

from __future__ import annotations

import random

import pytest

from rag.judge import nli_data, synth

S = "Dense retrieval outperforms BM25 on Natural Questions, and it is 2 times faster (Table 3)."
DOC = [S, "We train DPR with in-batch negatives.", "Results on TriviaQA are reported in 2020."]


def rng() -> random.Random:
    return random.Random(0)


def test_a_flipped_direction_is_a_contradiction():
    out = synth.flip_direction("Pre-training improves accuracy on SQuAD.", rng())
    assert out == "Pre-training degrades accuracy on SQuAD."
    assert synth.flip_direction("Accuracy drops sharply.", rng()) is None  # no listed word


def test_negation_is_inserted_after_an_auxiliary_and_removed_when_present():
    assert synth.toggle_negation("The method is robust to noise.", rng()) == (
        "The method is not robust to noise."
    )
    assert synth.toggle_negation("The model does not require labels.", rng()) == (
        "The model does require labels."
    )
    # "may not" does not contradict "may"; two negations are left alone
    assert synth.toggle_negation("This may help retrieval.", rng()) is None
    assert synth.toggle_negation("It is not never wrong, no.", rng()) is None


def test_a_swapped_number_is_caught_and_names_and_table_numbers_are_left_alone():
    out = synth.change_number("GPT-3 reaches 71.2% on ResNet50 tasks.", rng())
    assert out is not None and "71.2" not in out and "GPT-3" in out and "ResNet50" in out
    assert synth.change_number("See Table 3 for GPT-3.", rng()) is None
    year = synth.change_number("The corpus was collected in 2019.", rng())
    assert year is not None and year != "The corpus was collected in 2019."
    assert year.split()[-1].rstrip(".").isdigit() and abs(int(year.split()[-1][:4]) - 2019) <= 3


def test_entities_swap_within_the_document_and_section_labels_are_not_names():
    names = synth.document_entities(DOC + ["RESULTS We find gains."])
    assert "DPR" in names and "TriviaQA" in names and "RESULTS" not in names
    out = synth.swap_entity(S, [n for n in names if n not in S], rng())
    assert out is not None and out != S and ("DPR" in out or "TriviaQA" in out)


def test_a_reversed_comparison_swaps_the_sides():
    out = synth.reverse_comparison("ColBERT outperforms BM25 on MS MARCO.", rng())
    assert out == "BM25 outperforms ColBERT on MS MARCO."


def test_quantifiers_change_to_their_exclusion():
    assert synth.change_quantifier("All models benefit from pre-training.", rng()) == (
        "No models benefit from pre-training."
    )


def test_supported_variants_keep_what_the_sentence_says():
    assert synth.sub_span(S, rng()) == "Dense retrieval outperforms BM25 on Natural Questions."
    assert synth.drop_parenthetical(S, rng()) == (
        "Dense retrieval outperforms BM25 on Natural Questions, and it is 2 times faster."
    )
    assert synth.restate_number("Recall rises to 85% with hybrid search.", rng()) == (
        "Recall rises to 85 percent with hybrid search."
    )
    assert synth.restate_number("We use 3 encoders.", rng()) == "We use three encoders."
    framed = synth.report_frame("Hybrid search helps.", rng())
    assert framed.endswith("hybrid search helps.") and framed != "Hybrid search helps."


def test_not_said_variants_add_what_the_sentence_does_not_give():
    out = synth.add_detail("Hybrid search helps.", ["TriviaQA"], rng())
    assert out.startswith("Hybrid search helps") and "TriviaQA" in out
    assert synth.hedge_to_certain("Reranking may improve precision.", rng()) == (
        "Reranking will always improve precision."
    )


def test_variants_label_every_pair_by_its_rule():
    pairs = synth.variants(S, DOC, rng())
    kinds = {p.kind: p.label for p in pairs}
    assert kinds["direction"] == "contradicted" and kinds["sub_span"] == "supported"
    assert kinds["entity"] == "contradicted" and kinds["extra_detail"] == "not_said"
    assert all(p.premise == S and p.hypothesis != S for p in pairs)


def test_scifact_pairs_use_rationales_flip_supported_claims_and_take_other_sentences():
    row = {
        "claim": "Aspirin increases the risk of bleeding.",
        "abstract": "We studied 1,000 patients from three hospitals. Aspirin use increased the "
        "risk of major bleeding. The follow-up of every patient lasted two years.",
        "label": "SUPPORT",
        "rationales": [["Aspirin use increased the risk of major bleeding."]],
    }
    pairs = nli_data.scifact_pairs([row], rng())
    gold = [p for p in pairs if p.kind == "scifact_gold"]
    assert [(p.premise, p.label) for p in gold] == [
        ("Aspirin use increased the risk of major bleeding.", "supported")
    ]
    flips = [p for p in pairs if p.kind.startswith("scifact_flip")]
    assert flips and all(p.label == "contradicted" for p in flips)
    assert any("decreases" in p.hypothesis for p in flips)
    others = [p for p in pairs if p.kind == "scifact_other_sentence"]
    assert others and all(p.label == "not_said" and "Aspirin" not in p.premise for p in others)


@pytest.mark.parametrize("seed", [0, 1])
def test_abstract_pairs_are_deterministic_and_balanced(seed):
    text = " ".join(DOC * 2)
    a = nli_data.abstract_pairs([text] * 3, random.Random(seed), per_label=5)
    b = nli_data.abstract_pairs([text] * 3, random.Random(seed), per_label=5)
    assert a == b
    counts = {lab: sum(p.label == lab for p in a) for lab in synth.NLI_LABELS}
    assert all(0 < n <= 5 for n in counts.values())
