"""The claim record: the paper's words and place, the reading of its wording, derived claims counted apart, and
the summaries that print them."""
from __future__ import annotations

import pytest

from blockheat.libs.experiments.common import (
    WORDING,
    Claim,
    ExperimentOutput,
    all_claims_markdown,
    tally,
    tally_line,
)


def _claim(name: str, holds: bool | None, *, derived: bool = False, wording: str = "about") -> Claim:
    return Claim(name, "ours within 20 % of 0.9", "0.9", "0.85", holds, "" if holds else "the model's reason",
                 quote="the efficiency is about 0.9", where="section 3.2, p. 4", wording=wording, derived=derived)


CLAIMS = [_claim("a", True), _claim("b", False), _claim("c", None), _claim("d", True, derived=True),
          _claim("e", False, derived=True, wording="significantly")]


def test_derived_claims_are_counted_apart_from_the_papers():
    assert tally(CLAIMS) == {
        "paper": {"claims": 3, "holds": 1, "does not hold": 1, "not comparable": 1},
        "derived": {"claims": 2, "holds": 1, "does not hold": 1, "not comparable": 0}}
    assert tally_line(CLAIMS) == ("3 paper claims: 1 hold, 1 do not hold, 1 not comparable; "
                                  "2 derived claims: 1 hold, 1 do not hold, 0 not comparable")
    assert tally_line(CLAIMS[:1]) == "1 paper claims: 1 hold, 0 do not hold, 0 not comparable"


def test_a_claim_quotes_the_paper_and_names_a_known_reading_of_its_words():
    with pytest.raises(ValueError, match="wording 'roughly' is not one of"):
        _claim("x", True, wording="roughly")
    with pytest.raises(ValueError, match="does not hold and needs a reason"):
        Claim("x", "t", "p", "o", False, quote="q", where="w")
    with pytest.raises(ValueError, match="needs the paper's words"):
        Claim("x", "t", "p", "o", True, where="section 1")
    with pytest.raises(ValueError, match="needs the paper's words"):
        Claim("x", "t", "p", "o", True, quote="the words")


def test_the_summary_quotes_the_paper_and_states_each_reading_it_uses():
    out = ExperimentOutput("demo", "Demo", "tiny", claims=CLAIMS)
    text = out.markdown()
    assert '- **a**: ours within 20 % of 0.9 (read as: about). The paper, section 3.2, p. 4: ' \
           '"the efficiency is about 0.9"' in text
    assert "- **d** (derived): " in text
    assert "| d | derived | 0.9 | 0.85 | holds | - |" in text
    assert "3 paper claims: 1 hold, 1 do not hold, 1 not comparable; 2 derived claims" in text
    readings = text.split("## How the paper's words are read")[1]
    assert f"- **about**: {WORDING['about']}" in readings
    assert f"- **significantly**: {WORDING['significantly']}" in readings
    assert "**small**" not in readings


def test_every_experiments_claims_in_one_table():
    first = ExperimentOutput("one", "One", "tiny", claims=CLAIMS[:2])
    second = ExperimentOutput("two", "Two", "tiny", claims=CLAIMS[3:])
    text = all_claims_markdown([first, second])
    assert "2 paper claims: 1 hold, 1 do not hold, 0 not comparable; 2 derived claims" in text
    assert "| one | b | paper | section 3.2, p. 4 | does not hold |" in text
    assert "| two | e | derived | section 3.2, p. 4 | does not hold |" in text
    assert "- `two/summary.md`: Two, scale `tiny`" in text
