"""Counts and articles in messages: `1 element`, `2 elements`, `an `int``, `a `float``. The
compiler, the runtime and both command lines word their messages with these; a leaf module,
like errors.py, so that the runtime needs nothing of the compiler for it
(tests/test_wording.py scans the messages for the mistakes they prevent)."""

from __future__ import annotations

import re

# nouns whose plural is not the noun and an `s`
_PLURALS = {"process": "processes", "matrix": "matrices", "index": "indices", "pass": "passes",
            "batch": "batches", "this": "these", "address": "addresses"}
# verbs whose plural form is not the singular without its `s`
_VERBS = {"is": "are", "was": "were", "has": "have", "does": "do"}
# a type name spelled letter by letter (`f32`, `u8`, `bf16`) or a single letter (`x`): its
# article follows the sound of the first letter's name ("an ef", "a you", "an ex")
_SPELLED = re.compile(r"[a-z]{1,2}\d|[a-z](\W|$)")
_LETTERS_SAID_WITH_A_VOWEL = set("aefhilmnorsx")


def plural(noun: str, count: int = 2) -> str:
    """The noun as `count` of it is said: `element`, `elements`; `process`, `processes`."""
    if count == 1:
        return noun
    return _PLURALS.get(noun, noun + "s")


def verb(singular: str, count: int) -> str:
    """The verb agreeing with `count` things, from its singular form: `differs`, `differ`;
    `matches`, `match`; `is`, `are`."""
    if count == 1:
        return singular
    if singular in _VERBS:
        return _VERBS[singular]
    if singular.endswith(("ches", "shes", "sses", "xes", "zes")):
        return singular[:-2]
    return singular.removesuffix("s")


def counted(count: int, noun: str) -> str:
    """`1 element`, `2 elements`, `0 processes`: a count with its noun."""
    return f"{count} {plural(noun, count)}"


def article(word: str) -> str:
    """`a` or `an` before `word` as it is read aloud: `an int`, `a float`, `an f32`, `a u8`,
    `a uniform`, `an unsigned char`, `an 8 x 8`, `a 16 x 8` (a leading backtick or quote is
    skipped)."""
    bare = word.lstrip("`'\"").lower()
    if not bare:
        return "a"
    if bare[0].isdigit():  # "an 8", "an 11", "an 18,000", "a 1 x 4"
        digits = re.match(r"\d+", bare).group()
        return "an" if digits[0] == "8" or (len(digits) % 3 == 2 and digits[:2] in ("11", "18")) else "a"
    if _SPELLED.match(bare):
        return "an" if bare[0] in _LETTERS_SAID_WITH_A_VOWEL else "a"
    if bare.startswith(("uni", "use", "usu", "uint", "one")):
        return "a"
    if bare.startswith(("hour", "honest")):
        return "an"
    return "an" if bare[0] in "aeiou" else "a"


def with_article(word: str) -> str:
    """`an `int``: the word after its article."""
    return f"{article(word)} {word}"
