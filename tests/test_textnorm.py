"""Text normalisation: expected strings written out by hand."""

from __future__ import annotations

from rag.text.normalize import (
    collapse_whitespace,
    expand_ligatures,
    join_hyphenated,
    match_key,
    match_key_with_offsets,
    normalize,
    plain_punctuation,
)


def test_ligatures_expand():
    assert (
        expand_ligatures("\ufb01ne \ufb02ow e\ufb00ect o\ufb03ce ba\ufb04e")
        == "fine flow effect office baffle"
    )


def test_plain_punctuation():
    assert (
        plain_punctuation("\u201cquoted\u201d \u2018x\u2019 a\u2013b a\u2014b \u22121")
        == "\"quoted\" 'x' a-b a-b -1"
    )
    assert (
        plain_punctuation("soft\u00adhyphen zero\u200bwidth a\u00a0b") == "softhyphen zerowidth a b"
    )


def test_join_hyphenated_only_at_line_breaks_before_lowercase():
    assert join_hyphenated("retrie-\nval") == "retrieval"
    assert join_hyphenated("retrie-  \n   val") == "retrieval"
    assert join_hyphenated("pre-trained") == "pre-trained"  # no line break: a real compound
    assert join_hyphenated("GPT-\n4") == "GPT-\n4"  # digit after the break: kept
    assert join_hyphenated("Bi-\nLSTM") == "Bi-\nLSTM"  # capital after the break: kept
    assert join_hyphenated("x -\ny") == "x -\ny"  # a dash after a space is punctuation


def test_collapse_whitespace():
    assert collapse_whitespace("  a \n\t b\n\nc  ") == "a b c"


def test_normalize_pipeline():
    raw = "The \ufb01ne-\ntuned   model\u2019s \u201cretrie-\nval\u201d \u2014 \uff21"
    assert normalize(raw) == 'The finetuned model\'s "retrieval" - A'
    assert normalize(raw, casefold=True) == 'the finetuned model\'s "retrieval" - a'
    assert normalize("\uff21", nfkc=False) == "\uff21"


def test_match_key_drops_punctuation_and_hyphens():
    assert match_key("Pre-trained, (BERT) models!") == "pretrained bert models"
    assert match_key("pre-\ntrained") == match_key("pretrained") == "pretrained"
    assert match_key("\ufb01ne-tuning") == "finetuning"
    assert match_key("  ...  ") == ""


def test_match_key_offsets_point_back_into_the_text():
    text = "A \ufb01ne, day"
    key, offsets = match_key_with_offsets(text)
    assert key == "a fine day"
    # "fi" both come from the ligature at index 2; the space after "fine" from the comma at 5.
    assert list(offsets) == [0, 1, 2, 2, 3, 4, 5, 7, 8, 9]
    assert len(offsets) == len(key)
