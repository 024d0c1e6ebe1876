"""RAG benchmark: indexing chunks/s through the real indexer, and top-10 query latency with the
HNSW index against an exact sequential scan in the same run, with the index's recall@10.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/rag.py [--chunks N] [--queries Q] [--orgs K]

What it does, on a scratch database `<DATABASE_URL's name>_rag` (dropped, re-created and migrated;
left afterwards for inspection):

1. Writes N synthetic products (about 40 words each, from a fixed vocabulary of 3000 made-up
   words, seeded random) spread over K organizations, untimed.
2. Indexing: `ai.rag.indexer.source_index` for every product (the worker's code path: read the
   source, chunk, embed, upsert into `ai_chunk` with its live HNSW index). Embeddings are the
   deterministic hash embeddings of MOCK_AI (384 dimensions, computed in this process), so the
   figure is the database and indexer cost without a model provider's latency.
3. Queries: Q questions made of 4-8 words of random products; for each, `ai.rag.retrieval.nearest`
   (top 10, one organization) with index scans off (exact, the baseline), then with the HNSW
   index (hnsw.iterative_scan) at each `--ef-search` value. Reports p50/p95 of each, the speedup
   over the exact scan, and recall@10 of the index against the exact answer. `--reuse` queries
   the previous run's database again (no re-indexing).

The machine is shared: figures are indicative. Progress goes to stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scratch import ScratchDatabase

WORDS_PER_PRODUCT = 40
VOCABULARY = 3000


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="products (one chunk each)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--orgs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument(
        "--ef-search", default="40,200", help="comma-separated hnsw.ef_search values to query with"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="query the scratch database of the previous run"
    )
    return parser.parse_args(argv)


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        "".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(VOCABULARY)
    ]


def setup_django(scratch: ScratchDatabase) -> None:
    os.environ.update(scratch.env(MOCK_AI="true", DEBUG="true"))
    import django

    django.setup()
    from core import rls

    rls.bypass_process()  # a platform process: it writes every tenant's rows


def write_products(
    args: argparse.Namespace, words: list[str], rng: random.Random
) -> list[tuple[object, str, str]]:
    from core.models import Organization
    from crm.models import Product

    orgs = [
        Organization.objects.create(name=f"Bench {n}", slug=f"bench-{n}") for n in range(args.orgs)
    ]
    rows = [
        Product(
            organization=orgs[n % len(orgs)],
            name=" ".join(rng.sample(words, 3)),
            description=" ".join(rng.choices(words, k=WORDS_PER_PRODUCT)),
        )
        for n in range(args.chunks)
    ]
    Product.objects.bulk_create(rows, batch_size=2000)
    return [(p.organization_id, str(p.pk), f"{p.name} {p.description}") for p in rows]


def index_all(products: list[tuple[object, str, str]]) -> float:
    from ai.mock import MockGateway
    from ai.rag.indexer import source_index

    gateway = MockGateway()
    started = time.perf_counter()
    for n, (org_id, pk, _) in enumerate(products, 1):
        source_index(organization_id=org_id, kind="product", source_id=pk, gateway=gateway)  # type: ignore[arg-type]
        if n % 5000 == 0:
            say(f"  indexed {n}")
    return time.perf_counter() - started


def run_queries(
    args: argparse.Namespace, products: list[tuple[object, str, str]], rng: random.Random
) -> tuple[list[float], dict[int, tuple[list[float], float]]]:
    """Exact latencies, and per ef_search value the HNSW latencies and mean recall@10."""
    from ai.mock import hash_embedding
    from ai.rag.retrieval import nearest

    efs = [int(v) for v in args.ef_search.split(",")]
    exact: list[float] = []
    indexed: dict[int, list[float]] = {ef: [] for ef in efs}
    recalls: dict[int, list[float]] = {ef: [] for ef in efs}
    for _ in range(args.queries):
        org_id, _, text = rng.choice(products)
        query = " ".join(rng.sample(text.split(), rng.randint(4, 8)))
        vector = hash_embedding(query)
        started = time.perf_counter()
        truth = {r.id for r in nearest(organization_id=org_id, vector=vector, k=10, exact=True)}  # type: ignore[arg-type]
        exact.append((time.perf_counter() - started) * 1000)
        for ef in efs:
            started = time.perf_counter()
            found = nearest(organization_id=org_id, vector=vector, k=10, ef_search=ef)  # type: ignore[arg-type]
            indexed[ef].append((time.perf_counter() - started) * 1000)
            recalls[ef].append(len({r.id for r in found} & truth) / max(len(truth), 1))
    return exact, {ef: (indexed[ef], statistics.mean(recalls[ef])) for ef in efs}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def existing_products() -> list[tuple[object, str, str]]:
    from crm.models import Product

    rows = Product.objects.order_by("created_at").values_list(
        "organization_id", "pk", "name", "description"
    )
    return [(org, str(pk), f"{name} {description}") for org, pk, name, description in rows]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    scratch = ScratchDatabase.beside("rag")
    seconds = None
    if not args.reuse:
        say(f"recreating and migrating {scratch.name} ...")
        scratch.recreate(scratch.env())
    setup_django(scratch)
    if args.reuse:
        products = existing_products()
    else:
        say(f"writing {args.chunks} products over {args.orgs} organizations ...")
        products = write_products(args, vocabulary(rng), rng)
        say("indexing (real indexer, hash embeddings, live HNSW index) ...")
        seconds = index_all(products)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ai_chunk")
        cursor.execute("SELECT count(*) FROM ai_chunk")
        (chunks,) = cursor.fetchone()
    say(f"querying {args.queries} times: exact, then HNSW per ef_search ...")
    exact, by_ef = run_queries(args, products, rng)
    if seconds is not None:
        print(f"chunks indexed: {chunks} in {seconds:.1f} s = {chunks / seconds:.0f} chunks/s")
    else:
        print(f"chunks: {chunks} (reused, indexing not timed)")
    p50_e, p95_e = percentile(exact, 50), percentile(exact, 95)
    print(f"query top-10, exact scan:          p50 {p50_e:.1f} ms  p95 {p95_e:.1f} ms")
    for ef, (times, recall) in by_ef.items():
        p50, p95 = percentile(times, 50), percentile(times, 95)
        print(
            f"query top-10, HNSW ef_search={ef:<4}: p50 {p50:.1f} ms  p95 {p95:.1f} ms  "
            f"recall@10 {recall:.3f}  speedup_p50={p50_e / p50:.2f} speedup_p95={p95_e / p95:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
