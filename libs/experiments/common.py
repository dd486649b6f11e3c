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

__all__ = ["SCALES", "VERDICTS", "Claim", "ExperimentOutput", "fmt", "markdown_table", "new_figure", "save_figure"]

SCALES = ("tiny", "full")


#: A claim's verdict, as the summary prints it.
VERDICTS = {True: "holds", False: "does not hold", None: "not comparable"}


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims: how we test it, the paper's number, ours, and the verdict here.

    holds: True (holds), False (does not hold) or None (not comparable: our setup cannot measure what the
    paper measured). A claim that does not hold or is not comparable must state its reason, which a test
    or a sensitivity run in the same experiment supports."""

    claim: str
    test: str
    paper: str
    ours: str
    holds: bool | None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.holds is not True and not self.reason.strip():
            raise ValueError(f"claim {self.claim!r} {VERDICTS[self.holds]} and needs a reason")

    @property
    def verdict(self) -> str:
        return VERDICTS[self.holds]


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
        """The summary: the claim table first (claim, paper's number, ours, verdict, reason), then how each
        claim is tested, then the sections."""
        held = sum(c.holds is True for c in self.claims)
        lines = [f"# {self.title}", "",
                 markdown_table([{"claim": c.claim, "paper": c.paper, "ours": c.ours, "verdict": c.verdict,
                                  "reason": c.reason or "-"} for c in self.claims],
                                ["claim", "paper", "ours", "verdict", "reason"]), "",
                 f"Experiment `{self.name}`, scale `{self.scale}`, {self.seconds:.1f} s. "
                 f"Claims holding here: {held} of {len(self.claims)}.", "", "## How each claim is tested", "",
                 *[f"- **{c.claim}**: {c.test}" for c in self.claims], ""]
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
