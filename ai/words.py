"""Words of a customer's text, as the AI's rules compare them: lower case, accents removed, stop
words dropped. The handoff rule (`ai.handoff`) reads a request for a person with it, and the
development fixtures (`ai.mock`) build their embeddings and sentiment from it.
"""

from __future__ import annotations

import re
import unicodedata

WORD = re.compile(r"[a-z0-9]+")
# Short function words carry no meaning for retrieval (Portuguese and English).
STOPWORDS = frozenset(
    [
        "a",
        "o",
        "e",
        "de",
        "da",
        "do",
        "das",
        "dos",
        "em",
        "no",
        "na",
        "nos",
        "nas",
        "um",
        "uma",
        "para",
        "por",
        "com",
        "que",
        "qual",
        "quais",
        "como",
        "se",
        "eu",
        "voce",
        "vocês",
        "voces",
        "tem",
        "ter",
        "é",
        "the",
        "of",
        "and",
        "to",
        "is",
        "in",
        "for",
        "what",
        "which",
        "how",
        "do",
        "does",
        "i",
        "you",
        "it",
    ]
)


def normalized_words(text: str) -> list[str]:
    """Lower case, accents removed, stop words dropped."""
    plain = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()
    return [w for w in WORD.findall(plain) if w not in STOPWORDS]
