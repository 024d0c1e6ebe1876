"""The documentation stands alone: every relative link in README.md and docs/ resolves (the file,
and the heading its anchor names), nothing points outside the repository, and every requirement id
the repository cites (`R-…`) is written out in docs/requirements.md."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Without git: what .gitignore leaves out (caches, the embedded PostgreSQL's clusters, var/).
SKIPPED_DIRS = {".git", ".venv", "var", "test-artifacts", "node_modules", "__pycache__"}
SKIPPED_PREFIXES = (".pgdata", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")
HEADING = re.compile(r"^#{1,6} (.*?)\s*$")
REQUIREMENT_ID = re.compile(r"(?<![\w-])R-[A-Z][0-9]+(?![\w-])")
REQUIREMENTS = REPO / "docs" / "requirements.md"
# Built from parts so this file does not match itself.
OUTSIDE = (".." + "/shared", "/wo" + "rk/")


def repository_files() -> Iterator[Path]:
    """The repository's files: tracked or new, not ignored (git), else the tree minus what
    .gitignore lists."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=False,
        )
    except OSError:  # no git on this machine
        listed = subprocess.CompletedProcess([], returncode=1)
    if listed.returncode == 0:
        for name in sorted(set(listed.stdout.decode().split("\0")) - {""}):
            path = REPO / name
            if path.is_file() and not path.is_symlink():
                yield path
        return
    for path in sorted(REPO.rglob("*")):
        parts = path.relative_to(REPO).parts
        if any(p in SKIPPED_DIRS or p.startswith(SKIPPED_PREFIXES) for p in parts):
            continue
        if path.is_file() and not path.is_symlink():
            yield path


def text_files() -> Iterator[tuple[Path, str]]:
    for path in repository_files():
        if path.stat().st_size > 2_000_000:
            continue
        try:
            yield path, path.read_text()
        except UnicodeDecodeError:
            continue


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def prose_lines(text: str) -> Iterator[str]:
    """The lines outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    for line in prose_lines(path.read_text()):
        if match := HEADING.match(line):
            base = slug(match.group(1))
            seen[base] = seen.get(base, 0) + 1
            if seen[base] > 1:
                seen[f"{base}-{seen[base] - 1}"] = 1
    return set(seen)


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    broken = []
    for line in prose_lines(path.read_text()):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("<"):
                continue  # http(s):, mailto: ...
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            if not resolved.exists() or root not in (resolved, *resolved.parents):
                broken.append(f"{target} (no such file in the repository)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{target} (no heading #{anchor} in {resolved.name})")
    return broken


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = {
        str(path.relative_to(REPO)): links
        for path in markdown_files()
        if (links := broken_links(path))
    }
    assert broken == {}


def test_the_link_check_sees_a_broken_file_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Title\n\n## A section\n")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md#a-section) [gone](c.md) [bad](b.md#nope) [self](#missing)\n"
        "```\n[in code](nowhere.md)\n```\n# Missing\n"
    )
    broken = broken_links(page, root=tmp_path)
    assert [link.split(" ")[0] for link in broken] == ["c.md", "b.md#nope"]


def test_no_file_points_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(REPO)}: {marker}"
        for path, text in text_files()
        for marker in OUTSIDE
        if marker in text
    ]
    assert offenders == []


def requirement_entries() -> set[str]:
    return {
        match.group(1)
        for line in prose_lines(REQUIREMENTS.read_text())
        if (match := re.match(r"^## (R-[A-Z][0-9]+)$", line))
    }


def test_every_cited_requirement_has_an_entry_and_every_entry_is_cited() -> None:
    cited: dict[str, set[str]] = {}
    for path, text in text_files():
        if path != REQUIREMENTS:
            for rid in REQUIREMENT_ID.findall(text):
                cited.setdefault(rid, set()).add(str(path.relative_to(REPO)))
    entries = requirement_entries()
    assert {rid: sorted(paths) for rid, paths in cited.items() if rid not in entries} == {}
    assert entries - set(cited) == set()


def test_the_readme_is_a_short_tour_with_the_two_commands_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 600  # the rest lives in docs/, linked from it
    commands = re.findall(r"^python3 -m dev (\w+) ", readme, re.M)
    assert commands[:2] == ["run", "test"]
    assert (REPO / ".ci" / "run").read_text().rstrip().endswith("python3 -m dev test")
