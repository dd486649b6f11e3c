"""What every experiment returns and how it is written: tables (Parquet), PNG plots, and a markdown
summary with our numbers next to the paper's and a verdict per claim."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "ABOUT",
    "CLOSE",
    "SCALES",
    "SIGNIFICANT",
    "SMALL_PP",
    "VERDICTS",
    "WORDING",
    "Claim",
    "ExperimentOutput",
    "about",
    "all_claims_markdown",
    "close",
    "fmt",
    "markdown_table",
    "new_figure",
    "save_figure",
    "significantly",
    "small",
    "tally",
    "tally_line",
    "wording_block",
]

SCALES = ("tiny", "full")


#: A claim's verdict, as the summary prints it.
VERDICTS = {True: "holds", False: "does not hold", None: "not comparable"}


#: How a paper's wording becomes a threshold. Every claim names the reading it is judged by (`wording`), and
#: each summary states the readings its claims use.
WORDING: dict[str, str] = {
    "states": "a number or fact stated without qualifier: ours within the tolerance the test names",
    "about": "'about', 'roughly', 'approximately', '~': within 20 % of the paper's figure",
    "close": "'close to', 'near', 'nearly': within 10 % of the paper's figure (or its own margin)",
    "significantly": "'significantly', 'substantially', 'much': at least 1.25x the quantity compared with",
    "small": "'small', 'slight', 'little': at most a third of the quantity compared with, or at most 5 points",
    "in general": "'in general', 'usually', 'typically': in more than half of the cases compared, exceptions allowed",
    "order of magnitude": "'an order of magnitude': at least 5x",
    "direction": "a comparison without size ('better', 'lower', 'grows', 'more'): the sign, in every case compared",
}


#: WORDING's readings as numbers: "about" within ABOUT (a share) of the paper's figure, "close" within CLOSE,
#: "significantly" at least SIGNIFICANT times, "small" at most a third or SMALL_PP points.
ABOUT = 0.20
CLOSE = 0.10
SIGNIFICANT = 1.25
SMALL_PP = 5.0


def about(ours: float, paper: float) -> bool:
    """WORDING "about": within ABOUT (a share) of the paper's figure."""
    return bool(abs(ours - paper) <= ABOUT * abs(paper))


def small(gap: float, compared: float) -> bool:
    """WORDING "small": at most a third of the quantity compared with, or at most SMALL_PP points."""
    return bool(gap <= max(abs(compared) / 3.0, SMALL_PP))


def close(ours: float, best: float) -> bool:
    """WORDING "close" ("nearly", "practically all"): within CLOSE (a share) of the best value."""
    return bool(ours >= best - CLOSE * abs(best))


def significantly(larger: float, compared: float) -> bool:
    """WORDING "significantly": at least SIGNIFICANT times the quantity compared with (both positive)."""
    return bool(compared > 0 and larger >= SIGNIFICANT * compared)


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims: the paper's own words and where they are, how we test it, the paper's number,
    ours, and the verdict here.

    holds: True (holds), False (does not hold) or None (not comparable: our setup cannot measure what the
    paper measured). A claim that does not hold or is not comparable must state its reason, which a test
    or a sensitivity run in the same experiment supports. quote: the paper's sentence or table cell, verbatim;
    where: its place (section, page, table or figure); wording: the WORDING key its threshold follows. derived:
    our extrapolation of the paper's result to a drive, workload or parameter the paper did not measure;
    counted apart from the paper's own claims."""

    claim: str
    test: str
    paper: str
    ours: str
    holds: bool | None
    reason: str = ""
    quote: str = ""
    where: str = ""
    wording: str = "states"
    derived: bool = False

    def __post_init__(self) -> None:
        if self.holds is not True and not self.reason.strip():
            raise ValueError(f"claim {self.claim!r} {VERDICTS[self.holds]} and needs a reason")
        if not self.quote.strip() or not self.where.strip():
            raise ValueError(f"claim {self.claim!r} needs the paper's words (quote) and their place (where)")
        if self.wording not in WORDING:
            raise ValueError(f"claim {self.claim!r}: wording {self.wording!r} is not one of {sorted(WORDING)}")

    @property
    def verdict(self) -> str:
        return VERDICTS[self.holds]

    @property
    def kind(self) -> str:
        """'derived' for our extrapolations, 'paper' for the paper's own claims."""
        return "derived" if self.derived else "paper"


def tally(claims: Sequence[Claim]) -> dict[str, dict[str, int]]:
    """Verdict counts, the paper's own claims and the derived ones apart:
    {"paper": {"claims", "holds", "does not hold", "not comparable"}, "derived": {...}}."""
    counts = {kind: {"claims": 0, **{v: 0 for v in VERDICTS.values()}} for kind in ("paper", "derived")}
    for c in claims:
        counts[c.kind]["claims"] += 1
        counts[c.kind][c.verdict] += 1
    return counts


def tally_line(claims: Sequence[Claim]) -> str:
    """The counts in one sentence: the paper's claims first, then the derived ones."""
    parts = []
    for kind, n in tally(claims).items():
        if n["claims"]:
            label = "paper claims" if kind == "paper" else "derived claims"
            parts.append(f"{n['claims']} {label}: {n['holds']} hold, {n['does not hold']} do not hold, "
                         f"{n['not comparable']} not comparable")
    return "; ".join(parts) if parts else "no claims"


def wording_block(claims: Sequence[Claim]) -> str:
    """The readings of the paper's words the claims use, as a markdown list."""
    used = sorted({c.wording for c in claims}, key=list(WORDING).index)
    return "\n".join(["## How the paper's words are read", "", *[f"- **{w}**: {WORDING[w]}" for w in used]])


@dataclass
class ExperimentOutput:
    """An experiment's results. sections: markdown blocks (headings, comparison tables, notes) in order;
    plots: (file name, function drawing into that path)."""

    name: str
    title: str
    scale: str
    tables: dict[str, pa.Table] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    plots: list[tuple[str, Callable[[Path], None]]] = field(default_factory=list)
    seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    def finish(self) -> ExperimentOutput:
        self.seconds = time.perf_counter() - self.started
        return self

    def claim(self, name: str) -> Claim:
        found = [c for c in self.claims if c.claim == name]
        if not found:
            raise KeyError(f"no claim {name!r}; claims: {[c.claim for c in self.claims]}")
        return found[0]

    def markdown(self) -> str:
        """The summary: the claim table first (claim, kind, paper's number, ours, verdict, reason) with the counts,
        then each claim's test and the paper's words, how those words are read, then the sections."""
        lines = [f"# {self.title}", "",
                 markdown_table([{"claim": c.claim, "kind": c.kind, "paper": c.paper, "ours": c.ours,
                                  "verdict": c.verdict, "reason": c.reason or "-"} for c in self.claims],
                                ["claim", "kind", "paper", "ours", "verdict", "reason"]), "",
                 f"Experiment `{self.name}`, scale `{self.scale}`, {self.seconds:.1f} s. {tally_line(self.claims)}.",
                 "", "## How each claim is tested", "", *[_claim_item(c) for c in self.claims], ""]
        if self.claims:
            lines += [wording_block(self.claims), ""]
        for block in self.sections:
            lines += [block, ""]
        if self.tables:
            lines += ["## Files", "", *[f"- `tables/{n}.parquet` ({t.num_rows} rows)" for n, t in self.tables.items()],
                      *[f"- `{n}`" for n, _ in self.plots], ""]
        return "\n".join(lines)

    def write(self, out_dir: Path) -> list[Path]:
        """Tables, plots and summary.md under out_dir (created); returns the files written."""
        out_dir = Path(out_dir)
        (out_dir / "tables").mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self.tables.items():
            path = out_dir / "tables" / f"{name}.parquet"
            pq.write_table(table, path)
            written.append(path)
        for name, draw in self.plots:
            path = out_dir / name
            draw(path)
            written.append(path)
        summary = out_dir / "summary.md"
        summary.write_text(self.markdown())
        written.append(summary)
        return written


def _claim_item(c: Claim) -> str:
    kind = " (derived)" if c.derived else ""
    said = f' The paper, {c.where}: "{c.quote}"' if c.quote else ""
    return f"- **{c.claim}**{kind}: {c.test} (read as: {c.wording}).{said}"


def all_claims_markdown(outputs: Sequence[ExperimentOutput]) -> str:
    """One table of every experiment's claims (experiment, claim, kind, where, verdict) with the counts: what
    `blockheat experiment all --out DIR` writes to DIR/summary.md."""
    claims = [c for out in outputs for c in out.claims]
    rows = [{"experiment": out.name, "claim": c.claim, "kind": c.kind, "where": c.where or "-",
             "verdict": c.verdict} for out in outputs for c in out.claims]
    return "\n".join(["# Every experiment's claims", "", f"{tally_line(claims)}.", "",
                      markdown_table(rows, ["experiment", "claim", "kind", "where", "verdict"]), "",
                      *[f"- `{out.name}/summary.md`: {out.title}, scale `{out.scale}`, {out.seconds:.1f} s"
                        for out in outputs], "", wording_block(claims) if claims else "", ""])


def fmt(value: Any, digits: int = 4) -> str:
    """Numbers for the summary: infinity as the papers' symbol, floats to `digits` significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞"
        if math.isnan(value):
            return "-"
        return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    head = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def new_figure(ncols: int = 1, width: float = 6.5, height: float = 4.2) -> tuple[Any, Any]:
    """A matplotlib figure on the Agg backend (no display) with ncols panels."""
    # lazy: matplotlib is slow to import; the blockheat command loads this module at start
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, axes[0]


def save_figure(fig: Any, path: Path, title: str) -> None:
    import matplotlib.pyplot as plt  # lazy: as in new_figure

    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
