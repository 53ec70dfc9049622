#!/usr/bin/env python3
"""Fails when README.md or a docs/*.md names a repository path that does not exist.

What is checked:
- Every Markdown link target, `[text](target)`: resolved from the doc's own directory, with its
  `#anchor` dropped. A link that is only an anchor is skipped.
- Every path-like word inside backticks, inline (`...`) or in fenced code blocks: a word with a
  `/` whose last part ends in a known file extension (.rs .md .yaml .yml .sh .json .toml .go
  .py .mod .sum .lock .tpl), or a word ending in `/` (a directory). A `:LINE` suffix is dropped.
  It is resolved from the repository root. If it does not exist there, a short name is accepted
  when exactly one tracked file (`git ls-files`) ends with `/` + the name (for a directory: one
  tracked directory); none is "not found", several is "ambiguous". Both fail.

What is ignored: URLs (`http:`, `https:`, anything with `://`), absolute paths (they name places
on a machine or in a container, not in the repository: `/tmp/...`, `/etc/oz/...`), paths in
`~`, `target/`, `.run/` and `.run-fleet/`, and placeholders: any word containing `<`, `*`, `$`, `{` or `...`.

Each failure is printed as `DOC:LINE: PATH: why`; the exit status is 1 if there is any, else 0.
Run from anywhere: `hack/check-doc-paths.py` (`make doc-check` runs it).
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTENSIONS = ("rs", "md", "yaml", "yml", "sh", "json", "toml", "go", "py", "mod", "sum", "lock", "tpl")
PLACEHOLDERS = ("<", "*", "$", "{", "...", "\u2026")
IGNORED_PREFIXES = ("target/", ".run/", ".run-fleet/", "./target/", "./.run/")

CANDIDATE = re.compile(r"[^/]/|/$")  # has a slash that is not its only character
EXTENSION = re.compile(r"\.(" + "|".join(EXTENSIONS) + r")$")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LEFT_STRIP = "\"'`([!"
RIGHT_STRIP = "\"'`,;:.)]!?"


def tracked():
    out = subprocess.run(
        ["git", "-C", ROOT, "ls-files", "-z"], check=True, capture_output=True
    ).stdout.decode()
    files = [f for f in out.split("\0") if f]
    dirs = set()
    for f in files:
        parts = f.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return files, dirs


FILES, DIRS = tracked()


def ignored(word):
    return (
        "://" in word
        or word.startswith(("http:", "https:", "mailto:", "/", "~"))
        or word.startswith(IGNORED_PREFIXES)
        or any(p in word for p in PLACEHOLDERS)
    )


def path_like(word):
    if not CANDIDATE.search(word):
        return False
    return word.endswith("/") or bool(EXTENSION.search(word))


def resolve_short(word):
    """None if it resolves, else why not."""
    if word.endswith("/"):
        name = word.rstrip("/")
        matches = sorted(d + "/" for d in DIRS if d == name or d.endswith("/" + name))
    else:
        matches = sorted(f for f in FILES if f == word or f.endswith("/" + word))
    if len(matches) == 1:
        return None
    if not matches:
        return "not found"
    shown = ", ".join(matches[:4]) + (", ..." if len(matches) > 4 else "")
    return "ambiguous: " + shown


def check_code_word(word):
    word = word.lstrip(LEFT_STRIP)
    if not word.endswith("/"):
        word = word.rstrip(RIGHT_STRIP)
    word = re.sub(r":[0-9]+(-[0-9]+)?$", "", word)
    if word.startswith("./"):
        word = word[2:]
    if not word or ignored(word) or not path_like(word):
        return None, None
    if os.path.exists(os.path.join(ROOT, word)):
        return word, None
    return word, resolve_short(word)


def check_link(doc, target):
    target = target.split("#", 1)[0]
    if not target or ignored(target):
        return None
    path = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), target))
    if os.path.exists(path):
        return None
    return "not found (a link, from " + (os.path.dirname(doc) or ".") + "/)"


def code_words(text):
    # Words split by blanks and `=` (--flag=path), each checked on its own.
    return [w for w in re.split(r"[\s=]+", text) if w]


def check(doc):
    problems = []
    in_fence = False
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            spans = [line] if in_fence else [m.group(2) for m in INLINE_CODE.finditer(line)]
            for span in spans:
                for word in code_words(span):
                    path, why = check_code_word(word)
                    if why:
                        problems.append(f"{doc}:{number}: {path}: {why}")
            if not in_fence:
                for m in LINK.finditer(INLINE_CODE.sub("", line)):
                    why = check_link(doc, m.group(1))
                    if why:
                        problems.append(f"{doc}:{number}: {m.group(1)}: {why}")
    return problems


def main():
    docs = ["README.md"] + sorted(
        "docs/" + name for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md")
    )
    problems = [p for doc in docs for p in check(doc)]
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} path(s) named in the docs do not exist (rules: {os.path.relpath(__file__, ROOT)})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
