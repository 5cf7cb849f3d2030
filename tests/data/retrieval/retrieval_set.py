"""The labelled retrieval set of issue 11 and its near-miss distractor generator.

``processes.json``: process documents of an office-and-lab service robot, each with the
intent it serves (``action``/``action_class``, ``object``/``object_class``). Opposite actions
come in pairs (lights on/off, door open/close, pick up/put down, left/right, up/down,
plug in/unplug, load/unload, lid on/off).

``queries.json``: queries labelled with the one document that answers them and their style.

:func:`distractors` makes near misses: each is the action of one document applied to the
object of another, in an invented place, with steps borrowed from both — sharing most of
their words with real documents, but never an intent (action class, object class) that a
real document serves, nor an equivalent one (:data:`EQUIVALENT`: "put the blinds down" is
"lower the blinds"), so a label never becomes ambiguous. Deterministic for a seed.

Loaded by file path (``load_module``) from the tests and ``benchmarks/bench_retrieval.py``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

PLACES = [
    "annex",
    "building C",
    "loading bay 4",
    "north wing",
    "basement archive",
    "clean room",
    "training room",
    "workshop 2",
    "rooftop terrace",
    "server room",
    "cafeteria",
    "east stairwell",
    "visitor lounge",
    "quality lab",
    "copy room",
    "garage",
]

EXTRA_STEPS = [
    "log the task as done in the fleet console",
    "avoid the wet floor near the entrance",
    "wait for people in the corridor to pass",
    "announce yourself before entering the room",
    "check the battery is above 20 percent first",
    "ask a person nearby if anything is unclear",
]


# Action classes that mean the same for some object ("put the blinds down" lowers them,
# "open the lights" turns them on): a distractor may not pair an object with an action
# equivalent to one a real document does to it.
EQUIVALENT = {"pickup": "up", "putdown": "down", "open": "on", "close": "off"}


def _canon(action_class: object) -> str:
    return EQUIVALENT.get(str(action_class), str(action_class))


@dataclass(frozen=True)
class Query:
    query: str
    expected: str
    style: str


def processes() -> list[dict[str, object]]:
    """The labelled documents (with their intent fields)."""
    data = json.loads((HERE / "processes.json").read_text(encoding="utf-8"))
    return list(data["processes"])


def queries() -> list[Query]:
    """The labelled queries."""
    data = json.loads((HERE / "queries.json").read_text(encoding="utf-8"))
    return [Query(**q) for q in data["queries"]]


def markdown(doc: dict[str, object]) -> str:
    """A document of the set as process markdown (frontmatter + body)."""
    tags = ", ".join(str(t) for t in doc["tags"])  # type: ignore[attr-defined]
    return (
        f"---\nid: {doc['id']}\ntitle: {doc['title']}\ntask_pattern: {doc['task_pattern']}\n"
        f"tags: [{tags}]\n---\n\n{doc['body']}"
    )


def distractors(n: int, seed: int = 11) -> Iterator[dict[str, object]]:
    """``n`` near-miss documents (``id``, ``title``, ``task_pattern``, ``tags``, ``body``)."""
    docs = processes()
    intents = {(_canon(d["action_class"]), d["object_class"]) for d in docs}
    pairs = [
        (a, o)
        for a in docs
        for o in docs
        if a is not o and (_canon(a["action_class"]), o["object_class"]) not in intents
    ]
    rng = random.Random(seed)
    for i in range(n):
        a, o = pairs[rng.randrange(len(pairs))]
        place = rng.choice(PLACES)
        steps_a = str(a["body"]).splitlines()[1:]
        steps_o = str(o["body"]).splitlines()[1:]
        steps = [s.split(". ", 1)[1] for s in (*rng.sample(steps_a, 2), *rng.sample(steps_o, 1))]
        steps.insert(rng.randrange(len(steps) + 1), rng.choice(EXTRA_STEPS))
        title = f"{str(a['action']).capitalize()} {o['object']} in the {place}"
        yield {
            "id": f"distractor-{i:05d}",
            "title": title,
            "task_pattern": f"{a['action']} {o['object']} in the {place}",
            "tags": [*list(o["tags"])[:2], place],  # type: ignore[call-overload]
            "body": "## Steps\n" + "".join(f"{k}. {s}\n" for k, s in enumerate(steps, 1)),
        }
