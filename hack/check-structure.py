#!/usr/bin/env python3
"""Fails when the source tree loses the shape docs/development.md describes:

- an import cycle between two files of one crate (file A names an item of file B, and B, by
  any road, names an item of A), or
- a non-test source file over MAX_LINES lines (a file's `#[cfg(test)]` modules don't count).

An arrow A -> B is any path A writes that resolves to an item of B: a `use` (crate::, super::,
self::, or a child module's name) or the same path written inline. A `use` in a mod.rs or
lib.rs that re-exports an item is followed through to the file that defines it, so
re-exporting alone makes no cycle. Test modules and tests.rs files are left out: a test names
what it tests. Comments and strings are blanked before reading, so a doc link is no import.

Run from anywhere: `hack/check-structure.py`; `--graph` prints every arrow, `--root DIR` checks
another checkout.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 600
# The folders whose crates are measured; target/ and the fuzz workspace's build are not source.
SKIP_DIRS = {"target", ".git", "node_modules", "fixtures"}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def blank_comments_and_strings(text):
    """Keeps line breaks (so line counts hold) and code; turns comments and literals to spaces."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and not re.match(r"\w", text[i - 1:i] or " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j + 1]))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or text.startswith("'\\u{", i):
            j = text.find("'", i + 2) + 1
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def strip_test_items(code):
    """Blanks every item under `#[cfg(test)]` (a module, a use, a function), keeping lines."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", code)
        if not m:
            return code
        start, j = m.start(), m.end()
        semi, brace = code.find(";", j), code.find("{", j)
        end = semi if brace < 0 or (0 <= semi < brace) else matching_brace(code, brace)
        code = code[:start] + re.sub(r"[^\n]", " ", code[start:end + 1]) + code[end + 1:]


def split_use_tree(tree):
    """`a::{b, c::{d as e}}` -> [(['a','b'], 'b'), (['a','c','d'], 'e')]; globs end in '*'."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)
    results = []

    def walk(prefix, t):
        if "{" not in t:
            t, _, alias = t.partition("@")
            segs = prefix + [s for s in t.split("::") if s]
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            if segs:
                results.append((segs, alias or segs[-1]))
            return
        head, _, rest = t.partition("{")
        inner = rest[: rest.rfind("}")]
        base = prefix + [s for s in head.split("::") if s]
        depth, part = 0, ""
        for ch in inner:
            if ch == "," and depth == 0:
                if part:
                    walk(base, part)
                part = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            part += ch
        if part:
            walk(base, part)

    walk([], tree)
    return results


class Crate:
    def __init__(self, name, roots):
        self.name = name
        self.modules = {}  # module path (tuple) -> file
        self.files = {}  # file -> module path
        self.children = {}  # module path -> {child name}
        self.uses = {}  # module path -> {name: (segs, from module)}
        self.code = {}
        for root in roots:
            base = () if len(roots) == 1 else (os.path.splitext(os.path.basename(root))[0],)
            self.load(base, root)

    def load(self, module, path):
        self.modules[module], self.files[path] = path, module
        self.children.setdefault(module, set())
        with open(path, encoding="utf-8") as f:
            code = strip_test_items(blank_comments_and_strings(f.read()))
        self.code[path] = code
        here = os.path.dirname(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        owns_dir = stem in ("lib", "main", "mod") or module == ()
        child_dir = here if owns_dir else os.path.join(here, stem)
        for m in re.finditer(r"(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", code):
            name = m.group(2)
            if name == "tests":
                continue
            candidates = [os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")]
            found = next((c for c in candidates if os.path.exists(c)), None)
            if found:
                self.children[module].add(name)
                self.load(module + (name,), found)
        uses = {}
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            for segs, alias in split_use_tree(m.group(1)):
                if alias != "*" and alias != "_":
                    uses[alias] = segs
        self.uses[module] = uses

    def resolve(self, module, segs, depth=0):
        """The file that defines what `segs`, written in `module`, names; None outside the crate."""
        if depth > 12 or not segs:
            return None
        cur, rest = module, list(segs)
        first = rest[0]
        if first == "crate":
            cur, rest = (), rest[1:]
        elif first == "self":
            rest = rest[1:]
        elif first == "super":
            while rest and rest[0] == "super":
                cur, rest = cur[:-1], rest[1:]
        elif first in self.children.get(module, ()):
            pass
        elif first in self.uses.get(module, {}) and self.uses[module][first] != segs:
            return self.resolve(module, self.uses[module][first] + rest[1:], depth + 1)
        else:
            return None
        while rest:
            seg = rest[0]
            if seg in self.children.get(cur, ()):
                cur, rest = cur + (seg,), rest[1:]
                continue
            target = self.uses.get(cur, {}).get(seg)
            if target is not None and target[-1] != "*":
                via = self.resolve(cur, target + rest[1:], depth + 1)
                if via:
                    return via
                if self.is_external(cur, target[0]):
                    return None  # another crate's item, re-exported here
            return self.modules.get(cur)
        return None  # a module itself, not an item of it

    def is_external(self, module, first):
        """Whether a path that starts with `first`, written in `module`, leaves this crate."""
        return first not in ("crate", "self", "super") and first not in self.children.get(module, ())

    def arrows(self):
        found = {}
        self.names = {}
        path_re = re.compile(r"(?<![\w:])((?:" + IDENT + r")(?:::(?:" + IDENT + r"|\*))+)")
        for path, module in self.files.items():
            targets = set()
            code = self.code[path]
            for m in re.finditer(r"(\bpub(?:\([^)]*\))?\s+)?\buse\s+([^;]+);", code):
                if m.group(1):
                    continue  # a re-export: followed where it is named, no arrow of its own
                for segs, _ in split_use_tree(m.group(2)):
                    if segs[-1] == "*":
                        segs = segs[:-1]
                        target = self.module_file(module, segs)
                    else:
                        target = self.resolve(module, segs)
                    if target:
                        targets.add(target)
                        self.names.setdefault((path, target), set()).add(segs[-1] if segs else "*")
            code_without_uses = re.sub(r"\buse\s+[^;]+;", "", code)
            for m in path_re.finditer(code_without_uses):
                target = self.resolve(module, m.group(1).split("::"))
                if target:
                    targets.add(target)
                    self.names.setdefault((path, target), set()).add(m.group(1).split("::")[-1])
            targets.discard(path)
            found[path] = targets
        return found

    def module_file(self, module, segs):
        """For a glob: the file of the module it opens."""
        cur = module
        for seg in segs:
            if seg == "crate":
                cur = ()
            elif seg == "super":
                cur = cur[:-1]
            elif seg == "self":
                pass
            elif seg in self.children.get(cur, ()):
                cur = cur + (seg,)
            else:
                return None
        return self.modules.get(cur)


def cycles(graph):
    """Tarjan's strongly connected components with more than one file."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def crates():
    """Every crate root under ROOT: lib.rs, main.rs, bin/*.rs, tests/*.rs (or tests/*/main.rs)."""
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        if "Cargo.toml" not in filenames:
            continue
        src = os.path.join(dirpath, "src")
        for root in ("lib.rs", "main.rs"):
            if os.path.exists(os.path.join(src, root)):
                yield os.path.join(src, root)
        for sub in ("src/bin", "examples", "fuzz_targets", "tests"):
            folder = os.path.join(dirpath, sub)
            if not os.path.isdir(folder):
                continue
            for entry in sorted(os.listdir(folder)):
                full = os.path.join(folder, entry)
                if entry.endswith(".rs"):
                    yield full
                elif os.path.exists(os.path.join(full, "main.rs")):
                    yield os.path.join(full, "main.rs")


def is_test_file(path):
    rel = os.path.relpath(path, ROOT)
    return os.path.basename(path) in ("tests.rs", "fixtures.rs") or "/tests/" in "/" + rel or rel.startswith("tests/")


def self_test():
    """The checker on a crate made here: it must name the cycle and the long file, and must
    not take a re-export, a test module or a doc comment for an import."""
    import tempfile
    global ROOT
    saved = ROOT
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            "Cargo.toml": "[package]\nname = \"t\"\n",
            # A real cycle (a <-> b); lib.rs re-exports (no arrow of their own) and uses c.rs.
            "src/lib.rs": "mod a;\nmod b;\nmod c;\npub mod d;\nmod f;\npub use d::Dee;\n"
            "pub use f::Eff;\npub const ROOT: u8 = 0;\npub fn takes(_: c::Shared) {}\n",
            "src/a.rs": "use crate::b::Bee;\npub struct Ay;\n",
            "src/b.rs": "pub struct Bee(super::a::Ay);\n",
            # crate::Dee is e.rs's (through two re-exports), not lib.rs's; the doc link and
            # the test module name lib.rs, and neither is an import.
            "src/c.rs": "/// [`crate::ROOT`]\npub struct Shared(pub crate::Dee);\n"
            "#[cfg(test)]\nmod tests {\n    use crate::ROOT;\n}\n",
            "src/d/mod.rs": "mod e;\npub use e::Dee;\n",
            "src/d/e.rs": "pub struct Dee;\n" + "// filler\n" * (MAX_LINES + 1),
            # f.rs names lib.rs's ROOT, and lib.rs only re-exports f.rs's Eff.
            "src/f.rs": "pub struct Eff;\npub const Y: u8 = crate::ROOT;\n",
        }
        for name, text in files.items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        ROOT = tmp
        crate = Crate("t", [os.path.join(tmp, "src/lib.rs")])
        found = [sorted(os.path.relpath(p, tmp) for p in c) for c in cycles(crate.arrows())]
        ROOT = saved
        expected = [["src/a.rs", "src/b.rs"]]
        if found != expected:
            sys.exit(f"hack/check-structure.py is broken: found cycles {found}, expected {expected}")
        long_lines = 1 + MAX_LINES + 1
        if long_lines - blank_test_lines(os.path.join(tmp, "src/d/e.rs")) <= MAX_LINES:
            sys.exit("hack/check-structure.py is broken: a long file was not counted as long")


def main():
    global ROOT
    self_test()
    show_graph = "--graph" in sys.argv
    if "--root" in sys.argv:
        ROOT = os.path.abspath(sys.argv[sys.argv.index("--root") + 1])
    failures, seen = [], set()
    for root in crates():
        crate = Crate(os.path.relpath(root, ROOT), [root])
        graph = crate.arrows()
        for path, targets in sorted(graph.items()):
            if show_graph:
                for t in sorted(targets):
                    print(f"{os.path.relpath(path, ROOT)} -> {os.path.relpath(t, ROOT)}")
        for component in cycles(graph):
            names = [os.path.relpath(p, ROOT) for p in component]
            failures.append(f"import cycle in {crate.name}: " + " <-> ".join(names))
            inside = set(component)
            for p in component:
                for t in sorted(graph[p] & inside):
                    names = ", ".join(sorted(crate.names.get((p, t), ())))
                    failures.append(f"    {os.path.relpath(p, ROOT)} -> {os.path.relpath(t, ROOT)}: {names}")
        for path, code in crate.code.items():
            if path in seen or is_test_file(path):
                continue
            seen.add(path)
            with open(path, encoding="utf-8") as f:
                total = f.read().count("\n")
            kept = total - blank_test_lines(path)
            if kept > MAX_LINES:
                failures.append(f"{os.path.relpath(path, ROOT)}: {kept} lines outside its tests (at most {MAX_LINES}): split it")
    for line in failures:
        print(line)
    if failures:
        print("\nhack/check-structure.py: the tree's structure checks failed (see docs/development.md, 'Layout')")
        return 1
    return 0


def blank_test_lines(path):
    """Lines inside `#[cfg(test)]` items of a file."""
    with open(path, encoding="utf-8") as f:
        code = blank_comments_and_strings(f.read())
    stripped = strip_test_items(code)
    return sum(1 for a, b in zip(code.split("\n"), stripped.split("\n")) if a.strip() and not b.strip())


if __name__ == "__main__":
    sys.exit(main())
