#!/usr/bin/env python3
"""The module graph of src/ and its import circles.

    python3 tests/import_graph.py            # every circle (strongly connected
                                             # component): its size and its files
    python3 tests/import_graph.py --check    # also the layering rules below; exits 1
                                             # and names the edge that breaks one

A node is a source file of the library crate (src/bin is another crate). An edge
a -> b: file a names module b, in a `use` item (`use crate::x::{y, z::w}`,
`use super::...`) or in a path in its code (`crate::x::y::f(...)`), resolved to the
deepest module that exists. Comments and a file's `#[cfg(test)] mod tests` are left
out: tests may reach anything. Python's standard library only.

The rules (--check):
- the command descriptor (commands/command_table.rs and command_table/) names no
  command family, no dispatch (commands/mod.rs) and no runtime state: it is the
  bottom of every room that reads it;
- acl/ names nothing of commands/ but the descriptor, and is in no circle with
  files outside it;
- no file but the binding file (commands/handlers.rs) names more than a quarter of
  the family files (commands/families/, admin/, exec/).
"""

import os
import re
import signal
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "src")

DESCRIPTOR = ("commands/command_table.rs", "commands/command_table/")
BINDING = "commands/handlers.rs"
FAMILY_DIRS = ("commands/families/", "commands/admin/", "commands/exec/")


def module_of(rel):
    """src-relative file -> its module path (a tuple of names)."""
    parts = rel[:-3].split("/")
    if parts == ["lib"]:
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def load():
    files = {}
    for dirpath, dirnames, filenames in os.walk(SRC):
        rel_dir = os.path.relpath(dirpath, SRC)
        if rel_dir == "bin" or rel_dir.startswith("bin/"):
            continue
        for f in filenames:
            if f.endswith(".rs"):
                rel = os.path.normpath(os.path.join(rel_dir, f))
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    files[rel] = fh.read()
    return files


def strip(text):
    """The text without comments, string literals and the test module."""
    m = re.search(r"#\[cfg\(test\)\]\s*mod tests\b", text)
    if m:
        text = text[: m.start()]
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (as lists of names)."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, t):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(t):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(t[start:i])
                start = i + 1
        items.append(t[start:])
        for item in items:
            if not item:
                continue
            brace = item.find("{")
            if brace >= 0:
                head = [p for p in item[:brace].split("::") if p]
                walk(prefix + head, item[brace + 1 : item.rfind("}")])
            else:
                name = re.sub(r"\bas\b.*$", "", item)
                out.append(prefix + [p for p in name.split("::") if p])

    walk([], tree)
    return out


def absolute(path, here, mods):
    """A path as written in module `here` -> a path from the crate root, or None
    for an outside crate (or a local name)."""
    if not path:
        return None
    if path[0] == "crate":
        return path[1:]
    if path[0] == "self":
        return list(here) + path[1:]
    if path[0] == "super":
        cur = list(here)
        while path and path[0] == "super":
            cur = cur[:-1]
            path = path[1:]
        return cur + path
    # Rust 2018: a path may start with a child module's name.
    if tuple(here) + (path[0],) in mods:
        return list(here) + path
    return None


def reexports(files, mods):
    """module -> {name: absolute path} of its `pub use` items."""
    out = {}
    for rel, text in files.items():
        here = module_of(rel)
        table = out.setdefault(here, {})
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", strip(text)):
            for p in expand_use(m.group(1)):
                a = absolute(p, here, mods)
                if a and p and p[-1] not in ("*", "self"):
                    table[p[-1]] = a
    return out


def resolve(a, mods, reexp, depth=0):
    """The file an absolute path names: the deepest module on it, through the
    re-exports (`pub use`) of the modules it passes."""
    for n in range(len(a), 0, -1):
        here = tuple(a[:n])
        if here in mods:
            if n < len(a) and depth < 8:
                target = reexp.get(here, {}).get(a[n])
                if target is not None and target != a:
                    return resolve(target + a[n + 1 :], mods, reexp, depth + 1)
            return mods[here]
    return None


def graph(files):
    mods = {module_of(rel): rel for rel in files}
    reexp = reexports(files, mods)
    edges = {rel: set() for rel in files}
    for rel, text in files.items():
        here = module_of(rel)
        body = strip(text)
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", body):
            paths += expand_use(m.group(1))
        for m in re.finditer(r"(?<![\w:])(\w+(?:::\w+)+)", body):
            paths.append(m.group(1).split("::"))
        for p in paths:
            a = absolute(p, here, mods)
            if a is None:
                continue
            target = resolve(a, mods, reexp)
            # The file itself is no edge.
            if target is not None and target != rel:
                edges[rel].add(target)
    return edges


def sccs(edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out, key=len, reverse=True)


def families(files):
    return {rel for rel in files if rel.startswith(FAMILY_DIRS)}


def check(files, edges, circles):
    errors = []
    fams = families(files)
    runtime = ("node/", "server/", "scripting/", "store/", "durability/", "cluster/")
    for rel, targets in sorted(edges.items()):
        if rel.startswith(DESCRIPTOR) or rel == DESCRIPTOR[0]:
            for t in sorted(targets):
                bad = (
                    t in fams
                    or t == "commands/mod.rs"
                    or t == BINDING
                    or t == "commands/context.rs"
                    or t.startswith(runtime)
                )
                if bad:
                    errors.append(f"the descriptor {rel} names {t}")
        if rel.startswith("acl/"):
            for t in sorted(targets):
                if t.startswith("commands/") and not t.startswith(DESCRIPTOR):
                    errors.append(f"{rel} names {t} (acl/ reads only the descriptor)")
        named = len(targets & fams)
        if rel != BINDING and named > len(fams) // 4:
            errors.append(
                f"{rel} names {named} of the {len(fams)} family files (only {BINDING} "
                "binds them all)"
            )
    for comp in circles:
        if any(r.startswith("acl/") for r in comp) and not all(
            r.startswith("acl/") for r in comp
        ):
            errors.append(f"acl/ is in a circle of {len(comp)} files: {comp}")
    return errors


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    files = load()
    edges = graph(files)
    circles = sccs(edges)
    print(f"{len(files)} files, {sum(len(t) for t in edges.values())} edges")
    if not circles:
        print("no circles")
    for comp in circles:
        print(f"circle of {len(comp)} files:")
        for rel in comp:
            print(f"  src/{rel}")
    if "--check" in sys.argv[1:]:
        errors = check(files, edges, circles)
        for e in errors:
            print(f"layering: {e}", file=sys.stderr)
        if errors:
            sys.exit(1)
        print("layering: ok")


if __name__ == "__main__":
    main()
