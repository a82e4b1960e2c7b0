"""The lab's records name the same keys as the service's response models, field by field.

``rag.lab.records`` and ``rag.lab.papers`` re-declare, as dataclasses, the JSON the desk returns;
``rag.serve.models`` and ``rag.serve.desk_models`` declare it for the OpenAPI document. When one
side gains (or loses) a key the other lacks, a notebook and the HTTP API would disagree on the
same answer, so these tests fail and name the key. Column lists of ``to_frame`` are checked against
the row models the same way. Fields that legitimately differ are listed, each with its reason.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from rag.lab import papers, records
from rag.serve import desk_models as dm
from rag.serve import models as m

#: record → the service's response model of the same JSON
PAIRS = {
    records.Hits: m.SearchResponse,
    records.Answer: m.AskResponse,
    records.ChatTurn: m.ChatResponse,
    papers.PaperList: m.PapersResponse,
    papers.Paper: dm.PaperOut,
    papers.Citations: dm.CitationsOut,
    papers.Related: dm.RelatedOut,
    papers.Summary: dm.SummaryOut,
}

#: records the desk returns with no HTTP response model to check against (yet): ``Lab.read``
#: and ``Lab.judge`` have no route with a ``response_model``; a record added without a model
#: must be listed here with its reason, or paired above.
NO_MODEL = {
    records.Verdict: "Desk.judge: no HTTP route declares a response model",
    papers.Page: "Desk.read: no HTTP route declares a response model",
}

#: record → (its ``to_frame`` columns' row model, columns the lab adds to each row, and why)
ROWS = {
    records.Hits: (m.Hit, {"rank"}),  # the hit's 1-based place in the list, from its position
    records.Answer: (m.Citation, set()),
    papers.PaperList: (m.ServedPaperOut, set()),
    papers.Paper: (dm.Section, set()),
    papers.Citations: (dm.Link, {"direction"}),  # "cites" or "cited_by": which list the row is
    papers.Related: (dm.RelatedPaper, set()),
}


def json_keys(record: type[records.Record]) -> set[str]:
    """The JSON keys a record holds as fields: local fields (``json: False``, e.g. ChatTurn's
    ``message``, the text as typed, and ``source_keys``) and ``extra`` are not keys; a renamed
    field (Summary's ``text_``, since ``text`` is a method) counts under its JSON key."""
    back = {v: k for k, v in record.renames.items()}
    return {
        back.get(f.name, f.name)
        for f in dataclasses.fields(record)
        if f.name != "extra" and f.metadata.get("json", True)
    }


@pytest.mark.parametrize("record", list(PAIRS), ids=lambda r: r.__name__)
def test_a_record_names_exactly_the_keys_of_its_response_model(record):
    model = PAIRS[record]
    mine, theirs = json_keys(record), set(model.model_fields)
    assert not theirs - mine, (
        f"{model.__name__} has {sorted(theirs - mine)}, which {record.__name__} lacks: add the "
        "field to the record (or it lands in .extra and to_frame misses it)"
    )
    assert not mine - theirs, (
        f"{record.__name__} has {sorted(mine - theirs)}, which {model.__name__} lacks: add it to "
        "the model (HTTP would drop it) or mark the field local with metadata={'json': False}"
    )


@pytest.mark.parametrize("record", list(ROWS), ids=lambda r: r.__name__)
def test_a_records_columns_are_its_row_models_fields(record):
    model, added = ROWS[record]
    cols = set(record.columns)
    assert cols - added == set(model.model_fields), (
        f"{record.__name__}.columns {sorted(cols - added)} != {model.__name__}'s fields "
        f"{sorted(model.model_fields)}"
    )
    assert added <= cols, f"{record.__name__}: the lab's own columns {sorted(added - cols)} left"


def test_every_record_is_paired_or_listed_without_a_model():
    found = {
        cls
        for mod in (records, papers)
        for _, cls in inspect.getmembers(mod, inspect.isclass)
        if issubclass(cls, records.Record) and cls is not records.Record
    }
    assert found == set(PAIRS) | set(NO_MODEL), (
        f"records neither paired nor listed: {sorted(c.__name__ for c in found - set(PAIRS))}"
    )
    assert not set(PAIRS) & set(NO_MODEL)


def test_the_check_sees_a_key_one_side_gained():
    @dataclasses.dataclass(repr=False)
    class Wider(records.Hits):
        reranked: bool = False

    assert json_keys(Wider) - set(m.SearchResponse.model_fields) == {"reranked"}
    assert json_keys(papers.Summary) >= {"text"} and "text_" not in json_keys(papers.Summary)
    assert "message" not in json_keys(records.ChatTurn)
