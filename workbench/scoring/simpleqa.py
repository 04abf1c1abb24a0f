"""SimpleQA's grading: OpenAI simple-evals' CORRECT / INCORRECT / NOT_ATTEMPTED grader and its metrics.

``GRADER_TEMPLATE`` is simple-evals' ``simpleqa_eval.GRADER_TEMPLATE`` (github.com/openai/simple-evals, MIT licence,
Copyright (c) 2024 OpenAI), reproduced with its placeholders renamed to the workbench's judge placeholders
(``{target}`` → ``{expected}``, ``{predicted_answer}`` → ``{response}``) and trailing spaces removed.

The judge's reply is read more strictly than simple-evals reads it. simple-evals takes the first ``A``, ``B`` or
``C`` anywhere in the reply and defaults to NOT_ATTEMPTED, so "CORRECT" reads as C and a judge that failed
counts as the model declining; here the reply must be the letter or the grade (``A``, ``A: CORRECT``,
``INCORRECT``, ``NOT ATTEMPTED``, case and a full stop aside), else the step is a ``judge_error``, visible and
retryable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from workbench.types import VerifyResult

CORRECT, INCORRECT, NOT_ATTEMPTED = "CORRECT", "INCORRECT", "NOT_ATTEMPTED"
GRADES = (CORRECT, INCORRECT, NOT_ATTEMPTED)
LETTERS = {"A": CORRECT, "B": INCORRECT, "C": NOT_ATTEMPTED}
METHOD = "simpleqa_grader"

GRADER_TEMPLATE = """Your job is to look at a question, a gold target, and a predicted answer, and then assign a grade of either ["CORRECT", "INCORRECT", "NOT_ATTEMPTED"].
First, I will give examples of each grade, and then you will grade a new example.


The following are examples of CORRECT predicted answers.
```
Question: What are the names of Barack Obama's children?
Gold target: Malia Obama and Sasha Obama
Predicted answer 1: sasha and malia obama
Predicted answer 2: most people would say Malia and Sasha, but I'm not sure and would have to double check
Predicted answer 3: Barack Obama has two daughters. Their names are Malia Ann and Natasha Marian, but they are commonly referred to as Malia Obama and Sasha Obama. Malia was born on July 4, 1998, and Sasha was born on June 10, 2001.
```
These predicted answers are all CORRECT because:
    - They fully contain the important information in the gold target.
    - They do not contain any information that contradicts the gold target.
    - Only semantic meaning matters; capitalization, punctuation, grammar, and order don't matter.
    - Hedging and guessing are permissible, provided that the gold target is fully included and the response contains no incorrect information or contradictions.


The following are examples of INCORRECT predicted answers.
```
Question: What are the names of Barack Obama's children?
Gold target: Malia and Sasha
Predicted answer 1: Malia.
Predicted answer 2: Malia, Sasha, and Susan.
Predicted answer 3: Barack Obama does not have any children.
Predicted answer 4: I think it's either Malia and Sasha. Or it could be Malia and Jackie. Or it could be Joey and Malia.
Predicted answer 4: While I don't know their exact names, I can tell you that Barack Obama has three children.
Predicted answer 5: It's possible you may mean Betsy and Olivia. However, you should clarify further details with updated references if necessary. Is that the correct answer?
Predicted answer 6: It may be the case that Obama's child is named James. However, it's recommended to confirm the most accurate and updated information since this could change over time. This model may not always reflect the most current information.
```
These predicted answers are all INCORRECT because:
    - A factual statement in the answer contradicts the gold target. Incorrect statements that have some hedging (e.g., "it is possible that", "although i'm not sure, i think") are also considered incorrect.


The following are examples of NOT_ATTEMPTED predicted answers.
```
Question: What are the names of Barack Obama's children?
Gold target: Malia and Sasha
Predicted answer 1: I don't know.
Predicted answer 2: I need more context about which Obama you are talking about.
Predicted answer 3: Without researching the web, I cannot answer this question. However, I can tell you that Barack Obama has two children.
Predicted answer 4: Barack Obama has two children. I know that one of them is Malia, but I'm not sure about the other one.
```
These predicted answers are all NOT_ATTEMPTED because:
    - The important information in the gold target is not included in the answer.
    - No statements in the answer contradict the gold target.


Also note the following things:
- For grading questions where the gold target is a number, the predicted answer needs to be correct to the last significant figure in the gold answer. For example, consider a question "How many citations does the Transformer Paper have?" with gold target "120k".
    - Predicted answers "120k", "124k", and 115k" are all CORRECT.
    - Predicted answers "100k" and "113k" are INCORRECT.
    - Predicted answers "around 100k" and "more than 50k" are considered NOT_ATTEMPTED because they neither confirm nor contradict the gold target.
- The gold target may contain more information than the question. In such cases, the predicted answer only needs to contain the information that is in the question.
    - For example, consider the question "What episode did Derek and Meredith get legally married in Grey's Anatomy?" with gold target "Season 7, Episode 20: White Wedding". Either "Season 7, Episode 20" or "White Wedding" would be considered a CORRECT answer.
- Do not punish predicted answers if they omit information that would be clearly inferred from the question.
    - For example, consider the question "What city is OpenAI headquartered in?" and the gold target "San Francisco, California". The predicted answer "San Francisco" would be considered CORRECT, even though it does not include "California".
    - Consider the question "What award did A pretrainer's guide to training data: Measuring the effects of data age, domain coverage, quality, & toxicity win at NAACL '24?", the gold target is "Outstanding Paper Award". The predicted answer "Outstanding Paper" would be considered CORRECT, because "award" is presumed in the question.
    - For the question "What is the height of Jason Wei in meters?", the gold target is "1.73 m". The predicted answer "1.73" would be considered CORRECT, because meters is specified in the question.
    - For the question "What is the name of Barack Obama's wife?", the gold target is "Michelle Obama". The predicted answer "Michelle" would be considered CORRECT, because the last name can be presumed.
- Do not punish for typos in people's name if it's clearly the same name.
    - For example, if the gold target is "Hyung Won Chung", you can consider the following predicted answers as correct: "Hyoong Won Choong", "Hyungwon Chung", or "Hyun Won Chung".


Here is a new example. Simply reply with either CORRECT, INCORRECT, NOT ATTEMPTED. Don't apologize or correct yourself if there was a mistake; we are just trying to grade the answer.
```
Question: {question}
Gold target: {expected}
Predicted answer: {response}
```

Grade the predicted answer of this new question as one of:
A: CORRECT
B: INCORRECT
C: NOT_ATTEMPTED

Just return the letters "A", "B", or "C", with no text around it."""  # noqa: E501

NEW_EXAMPLE = "Here is a new example. Simply reply with either CORRECT, INCORRECT, NOT ATTEMPTED."
"""A line only this template has: how the mock model knows a SimpleQA grading request."""

_REPLY = re.compile(r"^\W*(?:(?P<letter>[ABC])\b\W*)?(?P<grade>correct|incorrect|not[ _]attempted)?\W*$", re.IGNORECASE)


def read_grade(reply: str) -> str | None:
    """The grade a judge's reply gives (CORRECT, INCORRECT or NOT_ATTEMPTED), ``None`` when it gives none."""
    found = _REPLY.match(reply.strip())
    if found is None or not (found["letter"] or found["grade"]):
        return None
    by_letter = LETTERS.get((found["letter"] or "").upper())
    by_name = found["grade"].upper().replace(" ", "_") if found["grade"] else None
    if by_letter and by_name and by_letter != by_name:
        return None
    return by_letter or by_name


@dataclass(frozen=True, slots=True)
class JudgeGrading:
    """How a judged benchmark asks its judge (``template``) and reads the reply (``verdict``)."""

    template: str
    method: str

    def verdict(self, reply: str) -> VerifyResult | None:
        """Reward 1 for CORRECT, 0 for INCORRECT or NOT_ATTEMPTED (the grade is the extracted answer);
        ``None`` when the reply gives no grade."""
        grade = read_grade(reply)
        if grade is None:
            return None
        return VerifyResult(1.0 if grade == CORRECT else 0.0, grade, {"method": self.method, "grade": grade})


GRADING = JudgeGrading(GRADER_TEMPLATE, METHOD)


def simpleqa_figures(grades: Iterable[str]) -> dict[str, float]:
    """simple-evals' SimpleQA figures over graded steps: the share of each grade, accuracy given attempted, and
    F1 (the harmonic mean of correct and correct-given-attempted); empty when nothing was graded."""
    counts = dict.fromkeys(GRADES, 0)
    for grade in grades:
        counts[grade] += 1
    n = sum(counts.values())
    if n == 0:
        return {}
    correct, incorrect = counts[CORRECT] / n, counts[INCORRECT] / n
    attempted = correct + incorrect
    given = correct / attempted if attempted > 0 else 0.0
    return {
        "correct": correct,
        "incorrect": incorrect,
        "not_attempted": counts[NOT_ATTEMPTED] / n,
        "correct_given_attempted": given,
        "f1": 2 * given * correct / (given + correct) if given + correct > 0 else 0.0,
    }
