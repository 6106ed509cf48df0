#!/usr/bin/env bash
# Every path and code name that README.md and docs/*.md (and comments in the code) cite
# must exist in the tree:
#
#   tests/docs_paths.sh            (from anywhere; exits 1 and lists what is missing)
#
# What it checks:
# - Markdown links to files of the repository (`[x](docs/testing.md)`), and their
#   `#anchor` against the target's headings (GitHub's slugs).
# - Backticked paths and paths in code blocks that start with a top-level folder
#   (`src/`, `tests/`, `benches/`, `docs/`, `fuzz/`, `packaging/`, `vendor/`,
#   `examples/`, `.ci/`) or name a top-level file (`Cargo.toml`, `build.rs`...).
# - Backticked file names with a source extension (`long_run.rs`, `store/table.rs`,
#   `commands/atomic.rs::run`): some file in the repository must end with that path.
# - Backticked Rust paths (`Db::prefetch_slots`, `clock::mono_ns`, `redlockd::testing`):
#   every segment must occur as a word in the Rust sources.
# - docs/ARCHITECTURE.md's layout tree (the first code block after "## Layout"): each
#   entry, under its parent folder, and every file name its descriptions mention.
# - Comments in the code (`//` in .rs files of src/, tests/, benches/, examples/, fuzz/
#   and build.rs; `#` in the Cargo.toml files): repository paths (`src/...`,
#   `tests/...`...), file names with a path (`store/table.rs`), and module paths
#   (`crate::durability::tokens`, `exec::gate::run`): the modules must exist and the
#   item after them must be defined there (`fn`, `mod`, `struct`, `const`, a `use`...).
# Needs python3 (standard library only).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

exec python3 - "$@" <<'PY'
import os
import re
import sys

ROOT = os.getcwd()
DOCS = ["README.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir("docs") if f.endswith(".md")
)
TOP_DIRS = ("src/", "tests/", "benches/", "docs/", "fuzz/", "packaging/", "vendor/",
            "examples/", ".ci/")
TOP_FILES = {"Cargo.toml", "Cargo.lock", "build.rs", "README.md", ".dockerignore",
             ".gitignore"}
SOURCE_EXT = (".rs", ".c", ".sh", ".py", ".md", ".toml", ".conf", ".service", ".json",
              ".txt")
SKIP_DIRS = {".git", "target", "node_modules", "corpus", "artifacts", ".venv"}

all_files = []
all_dirs = set()
for dirpath, dirnames, filenames in os.walk(ROOT):
    dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
    rel = os.path.relpath(dirpath, ROOT)
    if rel != ".":
        all_dirs.add(rel.replace(os.sep, "/"))
    for f in filenames:
        all_files.append(os.path.normpath(os.path.join(rel, f)).replace(os.sep, "/"))
all_file_set = set(all_files)

rust_words = set()
for f in all_files:
    if f.endswith(".rs"):
        with open(f, encoding="utf-8", errors="replace") as fh:
            rust_words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", fh.read()))
rust_words.add("redlockd")

problems = []


def bad(doc, line, what):
    problems.append(f"{doc}:{line}: {what}")


def exists(path):
    path = path.rstrip("/")
    return path in all_file_set or path in all_dirs


def ends_with_somewhere(path):
    path = path.rstrip("/")
    if exists(path):
        return True
    suffix = "/" + path
    return any(f.endswith(suffix) for f in all_files) or any(
        d.endswith(suffix) for d in all_dirs)


def slug(heading):
    text = re.sub(r"`", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    out = set()
    counts = {}
    in_code = False
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            m = re.match(r"#{1,6}\s+(.*)", line)
            if m:
                s = slug(m.group(1))
                n = counts.get(s, 0)
                counts[s] = n + 1
                out.add(s if n == 0 else f"{s}-{n}")
    return out


def check_repo_path(doc, lineno, token):
    token = token.rstrip(".,;:)")
    if token.startswith(TOP_DIRS) or token in TOP_FILES:
        if any(ch in token for ch in "*<>$"):
            return
        if not exists(token):
            bad(doc, lineno, f"no such path: {token}")


def check_code_span(doc, lineno, span):
    span = span.strip()
    if not span or " " in span and not span.startswith(TOP_DIRS):
        # A command or a sentence: check only its path-like words.
        for word in span.split():
            check_repo_path(doc, lineno, word)
        return
    first = span.split()[0]
    if first.startswith(("http://", "https://", "rediss://", "redis://", "-")):
        return
    if first.startswith(TOP_DIRS) or first in TOP_FILES:
        check_repo_path(doc, lineno, first)
        return
    # A file name with a source extension, maybe followed by ::item.
    m = re.fullmatch(r"([\w./-]+?\.(?:rs|c|sh|py|toml|conf|service))(?:::(\w+))?", first)
    if m:
        if not ends_with_somewhere(m.group(1)):
            bad(doc, lineno, f"no file ends with: {m.group(1)}")
        if m.group(2) and m.group(2) not in rust_words:
            bad(doc, lineno, f"no Rust name {m.group(2)} (in `{first}`)")
        return
    # A Rust path: Type::item, module::item, crate::module (no spaces, no arguments).
    m = re.fullmatch(r"([A-Za-z_]\w*(?:::[A-Za-z_]\w*)+)(?:\(\))?", first)
    if m and first == span:
        check_rust_path(doc, lineno, m.group(1).split("::"), span)


# Crates other than this one whose paths docs may cite.
EXTERNAL = {"std", "core", "tokio", "mlua", "redis", "rustls", "tokio_rustls", "bytes",
            "hashbrown", "dashmap", "clap", "libc", "parking_lot", "criterion", "ffi"}
src_files = [f for f in all_files if f.startswith("src/") and f.endswith(".rs")]
word_cache = {}


def words_of(files):
    out = set()
    for f in files:
        if f not in word_cache:
            with open(f, encoding="utf-8", errors="replace") as fh:
                word_cache[f] = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", fh.read()))
        out |= word_cache[f]
    return out


def module_files(mods):
    """The source files of the module path `mods` (a file or a folder), anywhere in src/."""
    tail = "/".join(mods)
    hits = [f for f in src_files if f.endswith("/" + tail + ".rs")
            or f.endswith("/" + tail + "/mod.rs")]
    hits += [f for f in src_files if ("/" + tail + "/") in f]
    return sorted(set(hits))


def check_rust_path(doc, lineno, segs, span):
    if segs[0] in ("redlockd", "crate"):
        segs = segs[1:]
        if not segs:
            return
    mods = []
    while segs and segs[0][:1].islower() and len(segs) > 1:
        mods.append(segs.pop(0))
    if mods and mods[0] in EXTERNAL:
        return
    if mods:
        files = module_files(mods)
        if not files:
            bad(doc, lineno, f"no module {'::'.join(mods)} in src/ (in `{span}`)")
            return
        words = words_of(files)
    else:
        words = rust_words
    for seg in segs:
        if seg not in words:
            where = "::".join(mods) if mods else "the Rust sources"
            bad(doc, lineno, f"no Rust name {seg} in {where} (in `{span}`)")


for doc in DOCS:
    doc_dir = os.path.dirname(doc)
    in_code = False
    with open(doc, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    for lineno, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            for word in re.split(r"[\s=\"'(),]+", line):
                check_repo_path(doc, lineno, word)
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(doc_dir, path)) if path else doc
            full = full.replace(os.sep, "/")
            if path and not exists(full):
                bad(doc, lineno, f"link to a missing file: {target}")
                continue
            if anchor and full.endswith(".md") and anchor not in anchors(full):
                bad(doc, lineno, f"link to a missing heading: {target}")
        for span in re.findall(r"`([^`]+)`", line):
            check_code_span(doc, lineno, span)

# docs/ARCHITECTURE.md's layout tree.
arch = "docs/ARCHITECTURE.md"
with open(arch, encoding="utf-8") as fh:
    text = fh.read().split("\n")
try:
    start = next(i for i, l in enumerate(text) if l.startswith("## Layout"))
    open_fence = next(i for i in range(start, len(text)) if text[i].startswith("```"))
    close_fence = next(i for i in range(open_fence + 1, len(text))
                       if text[i].startswith("```"))
except StopIteration:
    bad(arch, 1, "no layout tree (a code block after '## Layout')")
    open_fence = close_fence = 0
stack = []  # (indent, folder)
for i in range(open_fence + 1, close_fence):
    line = text[i]
    if not line.strip():
        continue
    m = re.match(r"( *)(\S+)(\s{2,}|$)", line)
    indent = len(line) - len(line.lstrip(" "))
    name = m.group(2) if m else ""
    desc = line[m.end():] if m else line
    while stack and stack[-1][0] >= indent:
        stack.pop()
    parent = stack[-1][1] if stack else ""
    looks_like_path = name.endswith("/") or "." in name
    if m and looks_like_path and indent <= (stack[-1][0] + 2 if stack else 0):
        path = (parent + name).rstrip("/")
        if not exists(path):
            bad(arch, i + 1, f"layout entry does not exist: {path}")
        if name.endswith("/"):
            stack.append((indent, parent + name))
        here = parent + (name if name.endswith("/") else "")
    else:
        desc = line
        here = parent
    for fname in re.findall(r"[\w/.-]+\.(?:rs|c|sh|py|toml|md)\b", desc):
        if fname.startswith(TOP_DIRS) or fname in TOP_FILES:
            if not exists(fname):
                bad(arch, i + 1, f"no such path: {fname}")
        elif not (exists(here + fname) or ends_with_somewhere(fname)):
            bad(arch, i + 1, f"no file ends with: {fname}")

# Comments in the code.
def crate_names():
    """Every crate in the lock files (as Rust spells it): paths starting with one are
    not this crate's."""
    out = set()
    for lock in ("Cargo.lock", "fuzz/Cargo.lock"):
        if os.path.exists(lock):
            with open(lock, encoding="utf-8") as fh:
                out |= {n.replace("-", "_") for n in re.findall(r'^name = "([^"]+)"', fh.read(), re.M)}
    return out - {"redlockd"}


FOREIGN = EXTERNAL | crate_names() | {"alloc", "proc_macro", "test", "self", "super",
                                      "Self", "redis027", "ffi"}
DEFINES = r"(?:fn|mod|struct|enum|trait|type|const|static|macro_rules!|union)\s+{}\b"
item_cache = {}


def defined_in(name, files):
    """Whether `name` is an item of the module `files` make up: defined there, a macro
    there, or brought in by a `use` (a re-export)."""
    key = (name, tuple(files))
    if key not in item_cache:
        n = re.escape(name)
        alts = [DEFINES.format(n),
                # A re-export: the last segment of a `use` (or its `as` name).
                r"\buse\b[^;]*(?:::|\{|,|\bas)\s*" + n + r"\s*[;,}]",
                # A macro defined by a macro (`stub!(name, ...)`), a field.
                r"^\s*(?:pub(?:\([\w:]+\))?\s+)?" + n + r"\s*:"]
        if name[:1].isupper():
            alts.append(r"^\s*" + n + r"\s*[,({=]")  # an enum's variant
        pat = re.compile("|".join(alts), re.M)
        found = False
        for f in files:
            with open(f, encoding="utf-8", errors="replace") as fh:
                if pat.search(fh.read()):
                    found = True
                    break
        item_cache[key] = found
    return item_cache[key]


def exact_module_files(mods):
    """The files of `crate::mods`: src/a/b.rs or src/a/b/mod.rs (and the folder)."""
    base = "src/" + "/".join(mods)
    hits = [f for f in src_files if f in (base + ".rs", base + "/mod.rs")
            or f.startswith(base + "/")]
    if not hits and len(mods) == 1 and mods[0] in ("lib", "main"):
        hits = ["src/lib.rs"]
    return sorted(set(hits))


def check_comment_path(where, lineno, path):
    segs = path.split("::")
    absolute = segs[0] in ("crate", "redlockd")
    if absolute:
        segs = segs[1:]
    if not segs or segs[0] in FOREIGN or not segs[0][:1].islower():
        return
    find = exact_module_files if absolute else module_files
    # The longest run of leading segments that names a module.
    n = 0
    for i in range(len(segs), 0, -1):
        if all(x[:1].islower() for x in segs[:i]) and find(segs[:i]):
            n = i
            break
    if n == 0:
        if len(segs) == 1 or segs[0] in rust_words and not absolute and len(segs) == 2:
            # `x::y` where x is no module: a local name, a Lua or Redis name; only a
            # path that claims the crate (or three segments) must resolve.
            if not absolute and len(segs) == 2:
                return
        bad(where, lineno, f"no module {segs[0]} in src/ (in `{path}`)")
        return
    rest = segs[n:]
    if not rest:
        return
    files = find(segs[:n])
    if not defined_in(rest[0], files):
        bad(where, lineno, f"no item {rest[0]} in {'::'.join(segs[:n])} (in `{path}`)")
        return
    for seg in rest[1:]:
        if seg not in rust_words:
            bad(where, lineno, f"no Rust name {seg} (in `{path}`)")


def check_comment_file(where, lineno, token):
    token = token.rstrip(".,;:)'`")
    if any(ch in token for ch in "*<>${}"):
        return
    if token.startswith(TOP_DIRS):
        if not exists(token):
            bad(where, lineno, f"no such path: {token}")
    elif re.fullmatch(r"[\w.-]+(?:/[\w.-]+)+\.(?:rs|c|h|sh|py|toml|md)", token):
        if not ends_with_somewhere(token):
            bad(where, lineno, f"no file ends with: {token}")


def comment_text(line, hash_comments):
    if hash_comments:
        i = line.find("#")
        return line[i + 1:] if i >= 0 else None
    stripped = line.lstrip()
    if stripped.startswith("//"):
        return stripped[2:]
    # A comment after code: `//` outside a string (an even number of quotes before it).
    for m in re.finditer(r"\s//", line):
        before = line[:m.start()]
        if before.count('"') % 2 == 0 and "http:" not in before[-8:]:
            return line[m.end():]
    return None


code_files = [f for f in all_files
              if (f.endswith(".rs") and f.startswith(("src/", "tests/", "benches/",
                                                      "examples/", "fuzz/")))
              or f == "build.rs"]
code_files += [f for f in ("Cargo.toml", "fuzz/Cargo.toml") if f in all_file_set]
for f in sorted(code_files):
    hash_comments = f.endswith(".toml")
    with open(f, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    for lineno, line in enumerate(lines, 1):
        text = comment_text(line, hash_comments)
        if not text:
            continue
        for token in re.findall(r"[\w./-]+", text):
            if "/" in token and not token.startswith(("http", "//")):
                check_comment_file(f, lineno, token)
        for path in re.findall(r"(?<![\w:])([A-Za-z_]\w*(?:::[A-Za-z_]\w*)+)", text):
            check_comment_path(f, lineno, path)

if problems:
    print("docs cite paths or names that do not exist:")
    for p in problems:
        print("  " + p)
    sys.exit(1)
print(f"docs paths: ok ({len(DOCS)} docs, the comments of {len(code_files)} code files)")
PY
