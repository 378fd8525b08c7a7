"""LoCoMo evidence recall: conversations as turns, answerable questions, and R@k over distinct turns.

The scoring convention (the dev set's README): one memory per turn, text `"{speaker}: {text}"`
plus ` [shares a photo: {caption}]` when the turn has a caption, the session's date as its time;
questions of categories 1-4 with at least one evidence turn present; R@k is the share of a
question's evidence turns among the first k *distinct* turns a search returned, averaged.
The faces are driven over HTTP by locomo_faces.py; this module knows no face.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
DATA_FILE = "locomo-dev.json"


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation, as it is stored: one memory / document / fact."""

    conversation: str
    dia_id: str  # e.g. D3:14
    speaker: str
    session: int
    date_ms: int  # the session's date, UTC milliseconds
    text: str  # "{speaker}: {text}" (+ the photo caption)


@dataclass(frozen=True, slots=True)
class Question:
    """One answerable question: its evidence turns (only those present in the conversation)."""

    conversation: str
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation's turns in order and its answerable questions."""

    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def session_date_ms(raw: str) -> int:
    """A LoCoMo session time such as "1:56 pm on 8 May, 2023" as UTC milliseconds."""
    when = datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def turn_text(turn: dict[str, Any]) -> str:
    """The stored text of a turn, by the scoring convention."""
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def parse_sample(sample: dict[str, Any]) -> Conversation:
    """One LoCoMo sample (conversation + qa) as turns and answerable questions."""
    name = str(sample["sample_id"])
    conv = sample["conversation"]
    turns: list[Turn] = []
    numbers = sorted(int(k.split("_")[1]) for k in conv if k.startswith("session_") and isinstance(conv[k], list))
    for n in numbers:
        date_ms = session_date_ms(conv[f"session_{n}_date_time"])
        for t in conv[f"session_{n}"]:
            turns.append(Turn(name, t["dia_id"], t["speaker"], n, date_ms, turn_text(t)))
    present = {t.dia_id for t in turns}
    questions = []
    for qa in sample["qa"]:
        evidence = tuple(dict.fromkeys(e for e in qa.get("evidence", []) if e in present))
        if qa.get("category") in CATEGORIES and evidence:
            questions.append(Question(name, qa["question"], evidence, int(qa["category"])))
    return Conversation(name, tuple(turns), tuple(questions))


def load(data_dir: Path, limit_conversations: int | None = None) -> list[Conversation]:
    """The conversations of a LoCoMo file (`locomo-dev.json`, or the one .json file in the folder)."""
    path = data_dir / DATA_FILE
    if not path.exists():
        found = sorted(data_dir.glob("*.json"))
        if len(found) != 1:
            raise FileNotFoundError(f"{data_dir} holds no {DATA_FILE} (nor exactly one .json file)")
        path = found[0]
    samples = json.loads(path.read_text(encoding="utf-8"))
    out = [parse_sample(s) for s in samples]
    return out[:limit_conversations] if limit_conversations else out


def recall_at(returned: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """The share of the evidence turns among the first k distinct turns returned."""
    first = list(dict.fromkeys(returned))[:k]
    return sum(1 for e in evidence if e in first) / len(evidence)


@dataclass
class Scores:
    """Recall sums per k, overall and per category, for one face and mode."""

    n: int = 0
    sums: dict[int, float] | None = None
    by_category: dict[int, tuple[int, dict[int, float]]] | None = None

    def add(self, returned: Sequence[str], question: Question) -> None:
        """Count one question's answer."""
        if self.sums is None:
            self.sums = dict.fromkeys(KS, 0.0)
        if self.by_category is None:
            self.by_category = {}
        n, sums = self.by_category.get(question.category, (0, dict.fromkeys(KS, 0.0)))
        for k in KS:
            r = recall_at(returned, question.evidence, k)
            self.sums[k] += r
            sums[k] += r
        self.by_category[question.category] = (n + 1, sums)
        self.n += 1

    def table(self) -> dict[str, Any]:
        """R@k overall and per category, rounded to 4 places."""
        def mean(total: dict[int, float] | None, n: int) -> dict[str, float]:
            return {f"R@{k}": round((total or {}).get(k, 0.0) / n, 4) if n else 0.0 for k in KS}

        cats = {CATEGORIES[c]: {"n": n, **mean(s, n)} for c, (n, s) in sorted((self.by_category or {}).items())}
        return {"n": self.n, **mean(self.sums, self.n), "categories": cats}


def questions_of(conversations: Iterable[Conversation]) -> int:
    """How many answerable questions the conversations hold."""
    return sum(len(c.questions) for c in conversations)
