"""Stop keywords: the whole message, accent- and case-insensitive, configurable."""

from __future__ import annotations

import pytest

from whatsapp.stop import stop_keyword


@pytest.mark.parametrize(
    ("said", "keyword"),
    [
        ("STOP", "stop"),
        ("Sair", "sair"),
        ("  parár!! ", "parar"),
        ("CANCELAR.", "cancelar"),
        ("Descadastrar", "descadastrar"),
        ("quero sair", None),
        ("sair agora", None),
        ("", None),
        ("!!!", None),
        ("stopp", None),
    ],
)
def test_only_a_whole_message_keyword_counts(said: str, keyword: str | None) -> None:
    assert stop_keyword(said) == keyword


def test_the_list_is_configurable(settings: object) -> None:
    settings.WHATSAPP = {"STOP_KEYWORDS": ["Não quero mais"]}  # type: ignore[attr-defined]
    assert stop_keyword("nao QUERO mais!") == "nao quero mais"
    assert stop_keyword("sair") is None
