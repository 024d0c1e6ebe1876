# ruff: noqa: E501  (a data table: one product or question per line reads best)
"""A small fixed product catalogue with questions whose answer is one known product, for the RAG
retrieval quality test (hit@1 / hit@3) and the benchmark."""

from __future__ import annotations

# (name, description, price in cents)
PRODUCTS: list[tuple[str, str, int]] = [
    (
        "Tênis de corrida Veloz",
        "Tênis leve para corrida de rua, solado de borracha com amortecimento em gel, cabedal respirável.",
        29990,
    ),
    (
        "Bota de couro Trilha",
        "Bota impermeável de couro legítimo para trilhas e caminhadas na montanha, cano alto.",
        45900,
    ),
    (
        "Sandália Praia Sol",
        "Sandália de borracha para praia e piscina, secagem rápida, tiras ajustáveis.",
        5990,
    ),
    (
        "Mochila Urbana 20L",
        "Mochila para notebook de até 15 polegadas, compartimento acolchoado, tecido resistente à água.",
        18900,
    ),
    (
        "Garrafa térmica Inox",
        "Garrafa térmica de aço inox que mantém café quente por 12 horas e água gelada por 24 horas.",
        8990,
    ),
    (
        "Relógio esportivo Pulso",
        "Relógio com GPS, monitor cardíaco e contador de passos, bateria dura sete dias.",
        79900,
    ),
    (
        "Camiseta dry fit",
        "Camiseta de tecido dry fit que afasta o suor, ideal para academia e treinos.",
        4990,
    ),
    (
        "Jaqueta corta-vento",
        "Jaqueta leve corta-vento com capuz, dobrável em bolso, proteção contra chuva fina.",
        15990,
    ),
    (
        "Fone de ouvido Bluetooth",
        "Fone sem fio bluetooth com cancelamento de ruído e microfone para chamadas.",
        34900,
    ),
    (
        "Carregador portátil 10000mAh",
        "Bateria externa power bank de 10000mAh com duas saídas USB e carga rápida para celular.",
        12900,
    ),
    (
        "Óculos de sol polarizado",
        "Óculos de sol com lentes polarizadas e proteção UV400, armação de acetato.",
        22900,
    ),
    (
        "Tapete de yoga",
        "Tapete antiderrapante de yoga e pilates, espessura de 6 milímetros, acompanha alça.",
        9900,
    ),
    (
        "Kit de halteres",
        "Par de halteres emborrachados de 5 quilos para musculação em casa.",
        19900,
    ),
    (
        "Barraca de camping 4 pessoas",
        "Barraca para acampamento de quatro pessoas, montagem fácil, sobreteto impermeável.",
        39900,
    ),
    (
        "Lanterna de cabeça LED",
        "Lanterna de cabeça com LED recarregável por USB, três modos de luz, para camping e corrida noturna.",
        6990,
    ),
]

# (question, index of the product that answers it)
QUESTIONS: list[tuple[str, int]] = [
    ("Vocês têm tênis com amortecimento para correr na rua?", 0),
    ("Preciso de uma bota impermeável para fazer trilha", 1),
    ("Tem sandália para usar na piscina?", 2),
    ("Qual mochila cabe um notebook de 15 polegadas?", 3),
    ("A garrafa mantém o café quente por quantas horas?", 4),
    ("O relógio tem GPS e monitor cardíaco?", 5),
    ("Quero uma camiseta para treinar na academia que não fique suada", 6),
    ("Tem jaqueta com capuz que proteja da chuva?", 7),
    ("O fone bluetooth tem cancelamento de ruído?", 8),
    ("Vocês vendem power bank para carregar o celular?", 9),
    ("Os óculos de sol têm lente polarizada?", 10),
    ("Qual a espessura do tapete de yoga?", 11),
    ("Tem halteres de 5 quilos para musculação?", 12),
    ("Procuro uma barraca para acampar com a família de quatro pessoas", 13),
    ("A lanterna de cabeça é recarregável por USB?", 14),
]
